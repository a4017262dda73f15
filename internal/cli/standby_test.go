package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// TestStandbyAnswers503Everywhere runs two `custody serve` on one
// PostgreSQL schema and checks that the replica without the writer lease
// answers every signer route, on the API (with and without a key), the
// signer MCP endpoint and the admin listener, with 503 signer_standby and
// Retry-After, never a 2xx, 4xx (other than the admin 401 for a missing
// token), or another replica's data; and that the writer keeps serving.
func TestStandbyAnswers503Everywhere(t *testing.T) {
	dir := t.TempDir()
	token := "local-dev-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	tokens := "tokens:\n  - sha256: " + hex.EncodeToString(sum[:]) + "\n    tenant: local\n    agent: dev\n    session: laptop\n"
	must(t, os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte(tokens), 0o600))
	adminTok := strings.Repeat("A", 40)
	must(t, os.WriteFile(filepath.Join(dir, "admin"), []byte(adminTok), 0o600))
	db := pgtest.Schema(t)
	if code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "keys", "init", "--dir", dir); code != 0 {
		t.Fatalf("keys init = %d %s %s", code, out, errs)
	}

	type rep struct{ api, admin string }
	start := func(name string) rep {
		r := rep{freeAddr(t), freeAddr(t)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			code, _, stderr := runCLI(t, ctx, envMap(map[string]string{"CUSTODY_DATABASE_URL": db}), "", "serve", "--kubernetes-auth=false",
				"--static-tokens-file="+filepath.Join(dir, "tokens.yaml"), "--listen="+r.api, "--admin-listen="+r.admin,
				"--admin-token-file="+filepath.Join(dir, "admin"), "--gateway-listen=", "--metrics-listen=",
				"--signer-key-file="+filepath.Join(dir, signerKeyFile),
				"--data-dir="+filepath.Join(dir, name), "--log-level=error")
			if code != 0 {
				t.Errorf("serve %s exit %d: %s", name, code, stderr)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		waitHTTP(t, "http://"+r.api+"/healthz")
		return r
	}
	a := start("a")
	b := start("b")

	do := func(method, url, bearer, body string) (int, string, http.Header) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw), resp.Header
	}
	key := func(r rep) string {
		st, body, _ := do("POST", "http://"+r.api+"/v1/auth/static", "", `{"token":"`+token+`"}`)
		var k struct{ Key string }
		if st != 200 || json.Unmarshal([]byte(body), &k) != nil {
			t.Fatalf("static exchange = %d %s", st, body)
		}
		return k.Key
	}
	// Which one is the writer?
	var writer, standby rep
	deadline := time.Now().Add(20 * time.Second)
	for writer.api == "" {
		for _, r := range []rep{a, b} {
			if st, _, _ := do("POST", "http://"+r.api+"/v1/signer/runs", key(r), ""); st == 201 {
				writer = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no replica runs the signer")
		}
		time.Sleep(200 * time.Millisecond)
	}
	standby = b
	if writer == b {
		standby = a
	}
	k := key(standby)
	check := func(what string, st int, body string, h http.Header) {
		t.Helper()
		if st != http.StatusServiceUnavailable || !strings.Contains(body, "signer_standby") || h.Get("Retry-After") == "" {
			t.Errorf("standby %s = %d %.200s (Retry-After %q), want 503 signer_standby", what, st, body, h.Get("Retry-After"))
		}
	}
	for _, c := range []struct{ method, path, bearer, body string }{
		{"POST", "/v1/signer/runs", k, ""},
		{"POST", "/v1/signer/runs", "", ""},
		{"GET", "/v1/signer/runs/r_x/status", k, ""},
		{"POST", "/v1/signer/runs/r_x/decide", k, `{"call_id":"c","tool":"Bash","args":{}}`},
		{"GET", "/v1/signer/trust", k, ""},
		{"GET", "/v1/signer/../signer/trust", k, ""},
		{"POST", "/mcp/signer", k, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`},
	} {
		st, body, h := do(c.method, "http://"+standby.api+c.path, c.bearer, c.body)
		check("api "+c.method+" "+c.path, st, body, h)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/signer/trust"},
		{"GET", "/v1/signer/runs/r_x/bundle"},
		{"POST", "/v1/signer/approvals/a_x/approve"},
		{"POST", "/v1/signer/keys/rotate"},
		{"POST", "/v1/signer/log/rollback/acknowledge"},
		{"GET", "/v1/signer/records/0/salt"},
	} {
		st, body, h := do(c.method, "http://"+standby.admin+c.path, adminTok, "")
		check("admin "+c.method+" "+c.path, st, body, h)
	}
	if st, body, _ := do("GET", "http://"+writer.admin+"/v1/signer/trust", adminTok, ""); st != 200 {
		t.Errorf("writer admin trust = %d %s", st, body)
	}
}
