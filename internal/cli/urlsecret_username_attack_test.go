package cli

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// TestAttackRefusalQuotesTokenAsUserName: urlForError quotes a refused URL
// through url.URL.Redacted, which hides only the password. A credential
// written as the user name alone (https://TOKEN@host, the way GitHub
// tokens and many API keys go in a URL, and what the refusal "no user
// info" is about) is quoted whole into serve's stderr.
func TestAttackRefusalQuotesTokenAsUserName(t *testing.T) {
	const secret = "ghp_S3cr3tT0kenAsUserName"
	_, vkey, err := note.GenerateKey(rand.Reader, "w1.example")
	must(t, err)
	dir := t.TempDir()
	up := filepath.Join(dir, "upstreams.yaml")
	must(t, os.WriteFile(up, []byte("upstreams:\n  - name: docs\n    url: https://"+secret+"@mcp.example/mcp\n    tenants: [agents]\n"), 0o600))
	tokens := filepath.Join(dir, "tokens.yaml")
	must(t, os.WriteFile(tokens, []byte("tokens: []\n"), 0o600))
	for name, flag := range map[string]string{
		"git URL with a token as user":      "--gateway-provider-git-url=github=https://" + secret + "@github.example/",
		"witness with a token as user":      "--witness=" + vkey + "@https://" + secret + "@w1.example/",
		"mcp upstream with a token as user": "--mcp-upstreams=" + up,
	} {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := runCLI(t, context.Background(), envMap(nil), "", "serve", "--kubernetes-auth=false",
				"--static-tokens-file="+tokens, "--data-dir="+filepath.Join(dir, "data"), "--plaintext=all", flag)
			if code == 0 {
				t.Fatalf("serve accepted %s", flag)
			}
			if strings.Contains(stderr, secret) {
				t.Errorf("serve's refusal (exit %d) prints the token given as the URL's user name: %s", code, strings.TrimSpace(stderr))
			}
		})
	}
}
