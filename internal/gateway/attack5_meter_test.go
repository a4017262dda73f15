package gateway_test

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

func (f *fakeProvider) rawBodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

// HELD: the meter's rewrite (max output added under a budget,
// include_usage added to a chat stream) forwards a body with the model
// that was checked and every other member byte for byte: the rewrite only
// adds a member after the opening brace or replaces stream_options, and
// a body whose members the meter cannot read unambiguously (a case
// variant of max_tokens, stream_options) is refused under a budget or
// forwarded unchanged without one.
func TestAttack5MeterRewriteKeepsCheckedBody(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{reserve: 16})
	budget := metering.Usage{Requests: 1000, InputTokens: 1 << 40, OutputTokens: 1 << 20}
	scoped := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, Tenant: "t", Agent: "a", Budget: budget})
	free := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, Tenant: "t", Agent: "b"})
	for _, c := range []struct {
		tok, body string
		want      int // 0: any refusal
	}{
		{scoped, ` {"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 200},
		{scoped, "\t{\"model\":\"gpt-4o-mini\",\"x\":\"\xff\",\"messages\":[]}", 200},
		{scoped, `{"model":"gpt-4o-mini","Max_Tokens":99999,"messages":[]}`, 0},
		{scoped, `{"model":"gpt-4o-mini","max_tokens":null,"max_completion_tokens":0,"messages":[]}`, 200},
		{free, `{"model":"gpt-4o-mini","stream":true,"messages":[]}`, 200},
		{free, `{"model":"gpt-4o-mini","stream":true,"stream_options":null,"messages":[]}`, 200},
		{free, `{"model":"gpt-4o-mini","stream":true,"Stream_Options":{"include_usage":false},"messages":[]}`, 200},
		{free, `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":false,"x":"}"},"messages":[]}`, 200},
	} {
		n := len(up.rawBodies())
		r := mg.post(t, c.tok, "/openai/v1/chat/completions", c.body, nil)
		if c.want == 0 {
			if r.status == http.StatusOK {
				t.Errorf("%s: forwarded", c.body)
			}
			continue
		}
		if r.status != c.want {
			t.Errorf("%s: %d %q", c.body, r.status, r.body)
			continue
		}
		bs := up.rawBodies()
		if len(bs) != n+1 {
			t.Fatalf("%s: provider got %d requests", c.body, len(bs)-n)
		}
		got := bs[len(bs)-1]
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(got), &m); err != nil && !strings.Contains(c.body, "\xff") {
			t.Errorf("%s: forwarded %q, not JSON: %v", c.body, got, err)
			continue
		}
		if !strings.Contains(got, `"model":"gpt-4o-mini"`) || strings.Count(strings.ToLower(got), `"model"`) != 1 {
			t.Errorf("%s: forwarded %q", c.body, got)
		}
		if !strings.Contains(got, `"messages":[`) {
			t.Errorf("%s: forwarded %q lost messages", c.body, got)
		}
	}
}

// HELD: a metered request's body over the bound: under a budget it is
// refused unmeterable (400) and never reaches the provider; without one
// (a chat stream whose usage the meter would ask for) it is put back and
// forwarded byte for byte, unrewritten.
func TestAttack5MeterOverBound(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{reserve: 16, providerTools: true})
	budget := metering.Usage{Requests: 1000, InputTokens: 1 << 40, OutputTokens: 1 << 20}
	withBudget := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "t", Agent: "a", Budget: budget})
	none := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "t", Agent: "b"})
	big := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("q", 32<<20) + `"}]}`
	n := up.count()
	if r := mg.post(t, withBudget, "/openai/v1/chat/completions", big, nil); r.status == http.StatusOK || up.count() != n {
		t.Errorf("over-bound body under a budget: %d, provider hit %d", r.status, up.count()-n)
	}
	r := mg.post(t, none, "/openai/v1/chat/completions", big, nil)
	if r.status != http.StatusOK {
		t.Fatalf("over-bound stream without budget: %d %q", r.status, r.body)
	}
	bs := up.rawBodies()
	if got := bs[len(bs)-1]; sha256.Sum256([]byte(got)) != sha256.Sum256([]byte(big)) {
		t.Errorf("over-bound body forwarded changed: %d bytes, want %d", len(got), len(big))
	}
}
