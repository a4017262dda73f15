package gateway_test

import (
	"net/http"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (high): the default path allow-list admits generating
// endpoints whose bodies and responses the meter cannot read (OpenAI's
// legacy POST /v1/completions with max_tokens, n and best_of;
// Anthropic's POST /v1/complete). Under an output budget they were
// forwarded with nothing reserved and settled at zero output tokens:
// unbounded generation past the budget. Endpoints that generate nothing
// (embeddings, token counting) still pass.
func TestAttackUnmeterableGeneratingEndpoints(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai", "anthropic", "gemini"}, Budget: metering.Usage{OutputTokens: 1000}})
	for _, c := range []struct{ path, body string }{
		{"/openai/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"hi","max_tokens":100000,"n":8,"best_of":16}`},
		{"/openai/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"hi","max_tokens":100000}`},
		{"/anthropic/v1/complete", `{"model":"claude-2.1","prompt":"\n\nHuman: hi\n\nAssistant:","max_tokens_to_sample":100000}`},
	} {
		hits := up.count()
		r := mg.post(t, tok, c.path, c.body, nil)
		if r.status == http.StatusOK || up.count() != hits {
			t.Errorf("%s: %d %q forwarded=%v; want it refused under an output budget", c.path, r.status, r.body, up.count() != hits)
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/openai/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`},
		{"/openai/v1/responses/input_tokens", `{"model":"gpt-fake","input":"hi"}`},
		{"/anthropic/v1/messages/count_tokens", `{"model":"claude-fake","messages":[]}`},
		{"/gemini/v1beta/models/gemini-fake:countTokens", `{"contents":[]}`},
		{"/gemini/v1beta/models/gemini-fake:embedContent", `{"content":{}}`},
		{"/gemini/v1/models/gemini-fake:batchEmbedContents", `{"requests":[]}`},
	} {
		if r := mg.post(t, tok, c.path, c.body, nil); r.status != http.StatusOK {
			t.Errorf("%s: %d %q; want it forwarded", c.path, r.status, r.body)
		}
	}
}
