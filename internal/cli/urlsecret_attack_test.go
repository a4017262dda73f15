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

// TestAttackServeRefusalQuotesURLPassword: a URL flag or file that
// custody refuses is quoted whole in the refusal, user information
// included, so the password an operator put in it lands in serve's
// stderr (the pod log, collected and shipped). custody refuses these
// URLs because they carry credentials (an MCP upstream "without user
// info"; a witness or provider URL that does not parse), yet the refusal
// is exactly where the credential is printed. postgres.Open shows the
// way: it refuses without quoting the URL. Here each refusal must not
// contain the password.
func TestAttackServeRefusalQuotesURLPassword(t *testing.T) {
	const secret = "S3cr3t-Pa55w0rd"
	_, vkey, err := note.GenerateKey(rand.Reader, "w1.example")
	must(t, err)
	dir := t.TempDir()
	up := filepath.Join(dir, "upstreams.yaml")
	must(t, os.WriteFile(up, []byte("upstreams:\n  - name: docs\n    url: https://bob:"+secret+"@mcp.example/mcp\n    tenants: [agents]\n"), 0o600))
	tokens := filepath.Join(dir, "tokens.yaml")
	must(t, os.WriteFile(tokens, []byte("tokens: []\n"), 0o600))
	for name, flag := range map[string]string{
		"mcp upstream with user info":      "--mcp-upstreams=" + up,
		"witness with user info":           "--witness=" + vkey + "@https://bob:" + secret + "@w1.example/",
		"provider URL that does not parse": "--gateway-provider=acme=https://bob:" + secret + "@api.example:port/",
		"git URL with user info":           "--gateway-provider-git-url=github=https://bob:" + secret + "@github.example/",
	} {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := runCLI(t, context.Background(), envMap(nil), "", "serve", "--kubernetes-auth=false",
				"--static-tokens-file="+tokens, "--data-dir="+filepath.Join(dir, "data"), "--plaintext=all", flag)
			if code == 0 {
				t.Fatalf("serve accepted %s", flag)
			}
			if strings.Contains(stderr, secret) {
				t.Fatalf("serve's refusal (exit %d) prints the URL's password: %s", code, strings.TrimSpace(stderr))
			}
		})
	}
}
