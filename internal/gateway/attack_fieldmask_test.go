package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (medium): Google APIs take a response field mask (system
// parameter fields or $fields, header X-Goog-FieldMask) and other
// response formats (alt=proto). A Gemini request asking for candidates
// only got a response without usageMetadata: it was charged its
// reservation, whose input is an estimate from the body's size, while
// the provider bills the real input (a YouTube or file URI in a small
// body is hundreds of thousands of tokens): input budgets did not hold.
// The field mask is now taken off a metered request, and a response
// format the meter cannot read is refused under a budget.
func TestAttackGeminiFieldMaskHidesUsage(t *testing.T) {
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"gemini"}, Budget: metering.Usage{InputTokens: 100000}})
	const path = "/gemini/v1beta/models/gemini-fake:generateContent"
	for _, c := range []struct {
		query string
		hdr   map[string]string
	}{
		{"?fields=candidates", nil},
		{"?%24fields=candidates", nil},
		{"?alt=json&fields=candidates.content", nil},
		{"", map[string]string{"X-Goog-FieldMask": "candidates"}},
	} {
		h := map[string]string{"X-Fake-Input": "20000"}
		for k, v := range c.hdr {
			h[k] = v
		}
		if r := mg.post(t, tok, path+c.query, `{"contents":[]}`, h); r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.query, r.status, r.body)
		}
	}
	mg.usage(t, metering.UsageFilter{}) // every answered request settled
	bs, err := st.Budgets(context.Background(), metering.BudgetFilter{})
	if err != nil || len(bs) != 1 {
		t.Fatalf("%+v %v", bs, err)
	}
	if got := bs[0].Spent.InputTokens; got != 80000 {
		t.Errorf("spent input = %d after 4 requests of 20000 input tokens each", got)
	}
	hits := up.count()
	for _, q := range []string{"?alt=proto", "?%24alt=proto", "?alt=sse&alt=proto", "?alt=media"} {
		if r := mg.post(t, tok, path+q, `{"contents":[]}`, nil); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %q, want it refused as unmeterable", q, r.status, r.body)
		}
	}
	if up.count() != hits {
		t.Error("a request for a response format the meter cannot read reached the provider")
	}
}
