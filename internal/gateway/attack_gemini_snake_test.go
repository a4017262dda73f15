package gateway_test

import (
	"net/http"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (high): the Gemini API reads a request body as proto3 JSON,
// which accepts every field by its proto name as well as its JSON name
// (generation_config, max_output_tokens, candidate_count). The gateway
// only looked for the camelCase names: a candidate_count multiplied the
// output past the reservation, and a snake_case maximum was not seen (the
// default one was added beside it, leaving the provider to pick one).
func TestAttackGeminiSnakeCaseGenerationConfig(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{reserve: 64})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"gemini"}, Budget: metering.Usage{OutputTokens: 1000}})
	const path = "/gemini/v1beta/models/gemini-fake:generateContent"
	for _, body := range []string{
		// 500 per candidate, 8 candidates: 4000 > 1000.
		`{"contents":[],"generationConfig":{"maxOutputTokens":500,"candidate_count":8}}`,
		`{"contents":[],"generation_config":{"maxOutputTokens":500,"candidateCount":8}}`,
		// A maximum over the budget, by its proto name.
		`{"contents":[],"generation_config":{"max_output_tokens":100000}}`,
		`{"contents":[],"generationConfig":{"max_output_tokens":100000}}`,
	} {
		hits := up.count()
		r := mg.post(t, tok, path, body, nil)
		if r.status == http.StatusOK || up.count() != hits {
			t.Errorf("%s: %d %q, forwarded=%v; want it refused before forwarding", body, r.status, r.body, up.count() != hits)
		}
	}
	// Both spellings of one field: which one the provider takes cannot
	// be told.
	hits := up.count()
	if r := mg.post(t, tok, path, `{"contents":[],"generationConfig":{"maxOutputTokens":10,"max_output_tokens":100000}}`, nil); r.status != http.StatusBadRequest || up.count() != hits {
		t.Errorf("both spellings: %d %q", r.status, r.body)
	}
	// A snake_case body that fits is forwarded, with the maximum where
	// the client put it.
	if r := mg.post(t, tok, path, `{"contents":[],"generation_config":{"max_output_tokens":100,"candidate_count":2}}`, nil); r.status != http.StatusOK {
		t.Errorf("fitting snake_case body: %d %q", r.status, r.body)
	}
	// Without a maximum, the default one goes into the config the
	// client gave, not beside it.
	if r := mg.post(t, tok, path, `{"contents":[],"generation_config":{"temperature":0}}`, nil); r.status != http.StatusOK {
		t.Fatalf("snake_case body without a maximum: %d %q", r.status, r.body)
	}
	b := up.lastBody(t)
	gc, _ := b["generation_config"].(map[string]any)
	if _, both := b["generationConfig"]; both || gc["maxOutputTokens"] != float64(64) {
		t.Errorf("default maximum not in the client's generation_config: %v", b)
	}
}
