package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (low): the usage-only chunk the gateway asked an OpenAI chat
// stream for (and keeps from the client) was used only when no other
// chunk reported a usage. A stream reporting a small usage so far in an
// early content chunk (as some OpenAI-compatible servers do) was settled
// at that, the final usage dropped with the chunk.
func TestAttackStrippedUsageChunkIgnored(t *testing.T) {
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents", Budget: metering.Usage{OutputTokens: 100000}})
	r := mg.post(t, tok, "/openai/v1/chat/completions", chatStream, map[string]string{"X-Fake-Early-Usage": "1", "X-Fake-Input": "300", "X-Fake-Output": "500"})
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := mg.usage(t, metering.UsageFilter{Tenant: "agents"}); got.OutputTokens != 500 || got.InputTokens != 300 {
		t.Errorf("usage = %+v, want the final 300 in, 500 out", got)
	}
	bs, err := st.Budgets(context.Background(), metering.BudgetFilter{})
	if err != nil || len(bs) != 1 || bs[0].Spent.OutputTokens != 500 {
		t.Errorf("budgets = %+v, %v", bs, err)
	}
}
