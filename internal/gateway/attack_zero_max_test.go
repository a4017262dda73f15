package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (high): a declared maximum of 0 was taken as a maximum that
// fits any budget (0 output reserved, no default maximum added). Gemini
// reads proto3 JSON, where a zero maxOutputTokens is the same as none:
// the model's own maximum (tens of thousands of tokens, times
// candidateCount), with nothing reserved, so that concurrent requests
// each overran the budget. A zero maximum now counts as none (the default
// is set in its place); an Anthropic body without max_tokens (which the
// gateway cannot add) is refused under an output limit rather than
// forwarded with nothing reserved.
func TestAttackZeroMaxOutput(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{reserve: 64})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"gemini", "openai", "anthropic"}, Budget: metering.Usage{OutputTokens: 1000}})

	if r := mg.post(t, tok, "/gemini/v1beta/models/gemini-fake:generateContent", `{"contents":[],"generationConfig":{"maxOutputTokens":0,"candidateCount":2}}`, nil); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	gc, _ := up.lastBody(t)["generationConfig"].(map[string]any)
	if gc["maxOutputTokens"] != float64(32) {
		t.Errorf("Gemini maxOutputTokens 0 forwarded as %v, want the default 64 over 2 candidates", gc["maxOutputTokens"])
	}
	if r := mg.post(t, tok, "/openai/v1/chat/completions", strings.Replace(chatBody, `{`, `{"max_tokens":0,"max_completion_tokens":0,`, 1), nil); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if b := up.lastBody(t); b["max_completion_tokens"] != float64(64) || b["max_tokens"] != float64(64) {
		t.Errorf("OpenAI zero maxima forwarded as %v / %v", b["max_completion_tokens"], b["max_tokens"])
	}
	hits := up.count()
	for _, body := range []string{
		`{"model":"claude-fake","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"claude-fake","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"claude-fake","max_tokens":null,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		if r := mg.post(t, tok, "/anthropic/v1/messages", body, nil); r.status != http.StatusBadRequest {
			t.Errorf("Anthropic body without a maximum under an output limit: %d %q", r.status, r.body)
		}
	}
	if up.count() != hits {
		t.Error("an Anthropic body without a maximum reached the provider")
	}
}
