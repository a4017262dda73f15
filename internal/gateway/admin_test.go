package gateway

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestAdminMint(t *testing.T) {
	e := newEnv(t)
	start := time.Now().Truncate(time.Second)
	m := e.mintHTTP(t, `{"providers":["anthropic","anthropic","openai"],"ttl_seconds":600,"run_id":"r1","tenant":"agents","agent":"run-1","models":["claude-ok"]}`)
	if m.Token == "" || len(m.JTI) != 22 {
		t.Fatalf("mint response = %+v", m)
	}
	if d := m.ExpiresAt.Sub(start); d < 600*time.Second || d > 602*time.Second {
		t.Errorf("expires_at = %v, want about 600 s from now", m.ExpiresAt)
	}
	if strings.Join(m.Providers, ",") != "anthropic,openai" {
		t.Errorf("providers = %v, want deduplicated [anthropic openai]", m.Providers)
	}
	rec, ok := e.store.tokens[m.JTI]
	if !ok {
		t.Fatal("minted jti not recorded in the store")
	}
	if rec.RunID != "r1" || rec.Tenant != "agents" || rec.Agent != "run-1" || !rec.ExpiresAt.Equal(m.ExpiresAt) {
		t.Errorf("store record = %+v", rec)
	}
	b, _ := json.Marshal(rec)
	if strings.Contains(string(b), m.Token) || strings.Contains(string(b), strings.Split(m.Token, ".")[2]) {
		t.Error("the store record holds the token")
	}
	c, err := e.g.Verifier().Verify(m.Token)
	if err != nil {
		t.Fatal(err)
	}
	if c.RunID != "r1" || c.Tenant != "agents" || c.Agent != "run-1" || c.Models[0] != "claude-ok" || c.ID != m.JTI {
		t.Errorf("token claims = %+v", c)
	}

	def := e.mintHTTP(t, `{"providers":["gemini"]}`)
	if d := time.Until(def.ExpiresAt); d < 29*time.Minute || d > 31*time.Minute {
		t.Errorf("default TTL gives expires_at in %v, want 30 min", d)
	}
	max := e.mintHTTP(t, `{"providers":["gemini"],"ttl_seconds":86400}`)
	if d := time.Until(max.ExpiresAt); d < 23*time.Hour {
		t.Errorf("ttl_seconds 86400 gives %v", d)
	}
}

func TestAdminMintRefusals(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"no providers", `{"ttl_seconds":60}`, 400, "bad_request"},
		{"empty providers", `{"providers":[]}`, 400, "bad_request"},
		{"unknown provider", `{"providers":["mistral"]}`, 400, "bad_request"},
		{"ttl too long", `{"providers":["openai"],"ttl_seconds":86401}`, 400, "bad_request"},
		{"negative ttl", `{"providers":["openai"],"ttl_seconds":-1}`, 400, "bad_request"},
		{"unknown field", `{"providers":["openai"],"scope":"all"}`, 400, "bad_request"},
		{"wrong type", `{"providers":"openai"}`, 400, "bad_request"},
		{"trailing data", `{"providers":["openai"]} {}`, 400, "bad_request"},
		{"not JSON", `providers=openai`, 400, "bad_request"},
		{"empty model", `{"providers":["openai"],"models":[""]}`, 400, "bad_request"},
		{"huge", `{"providers":["openai"],"run_id":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.adminPost(t, "/v1/gateway/tokens", tt.body)
			var got struct {
				Error string `json:"error"`
			}
			json.Unmarshal([]byte(body), &got)
			if code != tt.status || got.Error != tt.code {
				t.Errorf("POST %s = %d %s, want %d %s", tt.body[:min(len(tt.body), 60)], code, body, tt.status, tt.code)
			}
		})
	}
	if len(e.store.tokens) != 0 {
		t.Errorf("refused mints recorded %d tokens", len(e.store.tokens))
	}
}

func TestAdminRevoke(t *testing.T) {
	e := newEnv(t)
	m := e.mintHTTP(t, `{"providers":["openai"]}`)
	for i := 0; i < 2; i++ {
		if code := e.revokeHTTP(t, m.JTI); code != 204 {
			t.Errorf("revoke #%d = %d, want 204", i+1, code)
		}
	}
	if len(e.store.revs) != 1 {
		t.Errorf("store holds %d revocations, want 1", len(e.store.revs))
	}
	code, body := e.adminPost(t, "/v1/gateway/tokens/never-minted/revoke", "")
	if code != 404 || !strings.Contains(body, `"error":"not_found"`) {
		t.Errorf("revoke unknown = %d %s, want 404 not_found", code, body)
	}
	code, body = e.adminPost(t, "/v1/gateway/tokens/"+strings.Repeat("x", 200)+"/revoke", "")
	if code != 404 || !strings.Contains(body, `"error":"not_found"`) {
		t.Errorf("revoke overlong jti = %d %s, want 404 not_found", code, body)
	}
	code, body = e.adminPost(t, "/v1/gateway/nothing", "")
	if code != 404 || !strings.Contains(body, `"error":"not_found"`) {
		t.Errorf("unknown admin route = %d %s", code, body)
	}
	resp, err := e.client.Get(e.admin.URL + "/v1/gateway/tokens")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /v1/gateway/tokens = %d, want 405", resp.StatusCode)
	}
}

func TestPrune(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	e := newEnv(t, func(o *Options) { o.Now = clock; o.PollInterval = time.Hour })
	m := e.mint(t, Grant{Providers: []string{"openai"}, TTL: time.Minute})
	if err := e.g.Revoke(t.Context(), m.JTI); err != nil {
		t.Fatal(err)
	}
	e.g.prune(t.Context(), now)
	if !e.g.revoked.has(m.JTI) || len(e.store.revs) != 1 {
		t.Fatal("a live revocation was pruned")
	}
	// Past exp + leeway the store and memory keep it for the grace
	// period, so a late revoke still answers 204 (and a clock stepped
	// back finds it: TestAttack10RevokedAfterClockStep).
	later := now.Add(time.Minute + DefaultLeeway + time.Second)
	e.g.prune(t.Context(), later)
	if !e.g.revoked.has(m.JTI) {
		t.Error("in-memory revocation dropped before the store's")
	}
	if err := e.g.Revoke(t.Context(), m.JTI); err != nil {
		t.Errorf("late revoke = %v, want nil", err)
	}
	e.g.prune(t.Context(), later.Add(pruneGrace))
	if len(e.store.revs) != 0 || len(e.store.tokens) != 0 {
		t.Errorf("store keeps %d revocations and %d tokens after the grace period", len(e.store.revs), len(e.store.tokens))
	}
	if e.g.revoked.has(m.JTI) {
		t.Error("in-memory revocation kept after the store's was pruned")
	}
	if _, _, ok := e.g.minted.cache.get(m.JTI); ok {
		t.Error("minted record of a pruned revocation still cached")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *Options) { o.Metrics = reg })
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	e.do(t, "POST", "/openai/v1/chat/completions", bearer(tok), "{}")
	e.do(t, "POST", "/openai/v1/chat/completions", nil, "{}")
	e.do(t, "POST", "/whatever-"+tok[:10]+"/x", nil, "{}")
	want := map[[2]string]float64{
		{"openai", outcomeProxied}:          1,
		{"openai", outcomeMissingToken}:     1,
		{"unknown", outcomeUnknownProvider}: 1,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "custody_gateway_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "provider":
					k[0] = l.GetValue()
				case "outcome":
					k[1] = l.GetValue()
				}
			}
			got[k] = m.GetCounter().GetValue()
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("custody_gateway_requests_total = %v, want %v", got, want)
	}
	// A second gateway on the same registry is refused, not silently
	// unregistered.
	if _, err := New(t.Context(), Options{Store: newMemStore(), SigningKey: e.key, Metrics: reg}); err == nil {
		t.Error("New with already registered metrics = nil error")
	}
}

// A run budget without a run would be silently ignored: the mint is
// refused instead, as are negative limits.
func TestMintBudgetChecks(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{
		`{"providers":["openai"],"run_budget":{"requests":1}}`,
		`{"providers":["openai"],"budget":{"requests":-1}}`,
		`{"providers":["openai"],"budget":{"requests":1,"dollars":5}}`,
	} {
		if code, resp := e.adminPost(t, "/v1/gateway/tokens", body); code != 400 {
			t.Errorf("mint %s = %d %s, want 400", body, code, resp)
		}
	}
	m := e.mintHTTP(t, `{"providers":["openai"],"run_id":"r","budget":{"output_tokens":9},"run_budget":{"requests":1}}`)
	if m.Budget == nil || m.Budget.OutputTokens != 9 || m.RunBudget == nil || m.RunBudget.Requests != 1 {
		t.Errorf("mint response budgets = %+v %+v", m.Budget, m.RunBudget)
	}
}
