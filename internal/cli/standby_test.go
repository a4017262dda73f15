package cli

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStandbyAnswers503Everywhere runs two `custody serve` on one
// PostgreSQL schema and checks that the replica without the writer lease
// answers every signer route, on the API (with and without a key), the
// signer MCP endpoint and the admin listener, with 503 signer_standby and
// Retry-After, never a 2xx, 4xx (other than the admin 401 for a missing
// token), or another replica's data; and that the writer keeps serving.
func TestStandbyAnswers503Everywhere(t *testing.T) {
	p := newPGReplicas(t)
	keys := filepath.Join(p.dir, "keys")
	a, _ := p.start("a", keys)
	b, _ := p.start("b", keys)
	adminTok := strings.Repeat("A", 40)
	do, key := p.do, p.key
	type rep = replica

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
