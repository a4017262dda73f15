package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (medium): Gemini reports the input that a tool it runs itself
// brought in (url_context pages, google_search results) as
// usageMetadata.toolUsePromptTokenCount, apart from promptTokenCount,
// and bills it as input. The meter counted promptTokenCount only: a
// small request naming a large page was charged a fraction of its input
// and input budgets did not hold.
func TestAttackGeminiToolUsePromptUncounted(t *testing.T) {
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{providerTools: true}) // url_context is a provider-run tool
	tok := mg.mint(t, gateway.Grant{Providers: []string{"gemini"}, Tenant: "agents", Budget: metering.Usage{InputTokens: 100000}})
	body := `{"contents":[{"parts":[{"text":"summarize https://example.com/big"}]}],"tools":[{"url_context":{}}]}`
	if r := mg.post(t, tok, "/gemini/v1beta/models/gemini-fake:generateContent", body, map[string]string{"X-Fake-Input": "20", "X-Fake-Tool-Prompt": "50000"}); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := mg.usage(t, metering.UsageFilter{Tenant: "agents"}); got.InputTokens != 50020 {
		t.Errorf("input counted %d, want 50020 (prompt and tool-use prompt)", got.InputTokens)
	}
	bs, err := st.Budgets(context.Background(), metering.BudgetFilter{})
	if err != nil || len(bs) != 1 || bs[0].Spent.InputTokens != 50020 {
		t.Errorf("budgets %+v, %v", bs, err)
	}
}
