package gateway

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackScrubEncodedKey: "every response body and trailer is scrubbed
// of the real key" (README), but the gateway looks only for the key's
// literal bytes (and, for Basic auth, its exact base64). A kind http
// upstream that reflects the request's credential in another encoding,
// as error pages and debug endpoints do (percent-encoded in a URL,
// JSON-escaped by PHP's json_encode, hex, base64 inside a larger value),
// hands the real key to the sandbox. The MCP proxy already refuses an
// answer holding any of these forms (mcpproxy.secretForms); the gateway
// passes them on.
func TestAttackScrubEncodedKey(t *testing.T) {
	const secret = "c3VwZXI/c2VjcmV0+dG9rZW4/YWJjZA=="
	forms := map[string]string{
		"percent-encoded":         url.QueryEscape(secret),
		"php json_encode":         strings.ReplaceAll(secret, "/", `\/`),
		"hex":                     hex.EncodeToString([]byte(secret)),
		"base64 of Bearer header": base64.StdEncoding.EncodeToString([]byte("Bearer " + secret)),
	}
	up := newUpstream(t)
	up.handler = func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, forms[r.URL.Query().Get("form")])
	}
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: up.srv.URL,
			Auth: &ProviderAuth{Header: "Authorization", Prefix: "Bearer "}, AllowPaths: []string{"GET /echo"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "acme"), []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	tok := e.mint(t, Grant{Providers: []string{"acme"}}).Token
	for name, form := range forms {
		code, _, body := e.do(t, "GET", "/acme/echo?form="+url.QueryEscape(name), bearer(tok), "")
		if code == 200 && strings.Contains(body, form) {
			t.Errorf("%s: the upstream's echo of the real key reached the sandbox unscrubbed: %q", name, body)
		}
	}
}
