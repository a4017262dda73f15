package gateway_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (low): retrieving a Responses API response (GET
// /v1/responses/{id}, as the SDKs poll a background response) reports
// the usage of the request that made it, which was counted when that
// request settled; the retrieve counted it again, so polling a response
// spent a token's budget once per poll, until the retrieve itself was
// refused. Cancelling one (POST /v1/responses/{id}/cancel, no body) was
// refused under any budget as unmeterable, and counted twice too.
func TestAttackResponsesRetrieveCountedTwice(t *testing.T) {
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents", Budget: metering.Usage{OutputTokens: 1000}})
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, mg.data.URL+"/openai/v1/responses/resp_1", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Fake-Output", "400")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("retrieve: %d", res.StatusCode)
		}
	}
	if r := mg.post(t, tok, "/openai/v1/responses/resp_1/cancel", "", map[string]string{"X-Fake-Output": "400"}); r.status != http.StatusOK {
		t.Errorf("cancel: %d %q", r.status, r.body)
	}
	if got := mg.usage(t, metering.UsageFilter{Tenant: "agents"}); got != (metering.Usage{Requests: 4}) {
		t.Errorf("usage of 3 retrieves and a cancel = %+v, want 4 requests and no tokens", got)
	}
	bs, err := st.Budgets(context.Background(), metering.BudgetFilter{})
	if err != nil || len(bs) != 1 || bs[0].Spent != (metering.Usage{Requests: 4}) {
		t.Errorf("budgets = %+v, %v", bs, err)
	}
}
