package gateway

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

// TestAttackScrubUTF16: the key in UTF-16 (a .NET upstream echoing a
// string as Encoding.Unicode bytes) is scrubbed like its other forms
// (secretform.Forms). Line-wrapped base64 is not: see
// TestAttackScrubWrappedBase64 (knownleak).
func TestAttackScrubUTF16(t *testing.T) {
	const secret = "c3VwZXI/c2VjcmV0+dG9rZW4/YWJjZA=="
	var u16 bytes.Buffer
	for _, c := range utf16.Encode([]rune(secret)) {
		u16.WriteByte(byte(c))
		u16.WriteByte(byte(c >> 8))
	}
	up := newUpstream(t)
	up.handler = func(w http.ResponseWriter, r *http.Request) {
		w.Write(u16.Bytes())
	}
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: up.srv.URL,
			Auth: &ProviderAuth{Header: "Authorization", Prefix: "Bearer "}, AllowPaths: []string{"GET /echo"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "acme"), []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	tok := e.mint(t, Grant{Providers: []string{"acme"}}).Token
	if code, _, body := e.do(t, "GET", "/acme/echo", bearer(tok), ""); code == 200 && strings.Contains(body, u16.String()) {
		t.Errorf("UTF-16LE echo of the key reached the sandbox unscrubbed: %q", body)
	}
}
