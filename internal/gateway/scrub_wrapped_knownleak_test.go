//go:build knownleak

// This test shows a known weakness, not yet fixed, and fails: it is built
// only with -tags knownleak (README, Known limitations).

package gateway

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackScrubWrappedBase64: secretform.Forms looks for the
// key's base64 as one contiguous run of characters, but the common
// encoders of a larger blob wrap it in lines (MIME/PEM: Python's
// base64.encodebytes, OpenSSL, Java's MimeEncoder, 76 columns): when a
// line break falls inside the key's span, no form matches, and the echo
// (a debug endpoint returning the raw request base64-encoded) reaches the
// sandbox whole; removing the newlines gives the key back.
func TestAttackScrubWrappedBase64(t *testing.T) {
	const secret = "c3VwZXI/c2VjcmV0+dG9rZW4/YWJjZA=="
	// 38 bytes of request before "Bearer <key>" put the key's base64 at
	// columns 60..105: the break at 76 splits it.
	blob := []byte(strings.Repeat("x", 38) + "Bearer " + secret)
	enc := base64.StdEncoding.EncodeToString(blob)
	var wrapped strings.Builder
	for len(enc) > 76 {
		wrapped.WriteString(enc[:76] + "\n")
		enc = enc[76:]
	}
	wrapped.WriteString(enc + "\n")
	up := newUpstream(t)
	up.handler = func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, wrapped.String())
	}
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: up.srv.URL,
			Auth: &ProviderAuth{Header: "Authorization", Prefix: "Bearer "}, AllowPaths: []string{"GET /echo"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "acme"), []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	tok := e.mint(t, Grant{Providers: []string{"acme"}}).Token
	if code, _, body := e.do(t, "GET", "/acme/echo", bearer(tok), ""); code == 200 {
		dec, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(body, "\n", ""))
		if err == nil && bytes.Contains(dec, []byte(secret)) {
			t.Errorf("76-column base64 echo reached the sandbox unscrubbed; decoded it is %q", dec)
		}
	}
}
