package gateway_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/store/postgres"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// N replicas on one PostgreSQL database race one budget: what they let
// through never spends more than the budget plus one in-flight request
// per client (here the provider reports exactly what was reserved, so
// not at all), every refusal is "budget exceeded", and the counts the
// store holds equal what the provider served (LiteLLM #26672: spend
// over budget under concurrent traffic).
func TestMeterReplicasRaceOneBudget(t *testing.T) {
	const (
		replicas = 4
		clients  = 3 // per replica
		perReq   = 50
		limit    = 1000 // output tokens: 20 requests of 50
		attempts = 15   // per client: 180 tries for 20 places
	)
	url := pgtest.Schema(t)
	up := newFakeProvider(t)
	key := newKey(t)
	var gws []*meteredGW
	for range replicas {
		db, err := postgres.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		gws = append(gws, newMeteredGW(t, db, key, up, meteredOpts{}))
	}
	tok := gws[0].mint(t, gateway.Grant{Providers: []string{"anthropic"}, Tenant: "agents", RunID: "r", RunBudget: metering.Usage{OutputTokens: limit}})
	body := `{"model":"claude-fake","max_tokens":50,"messages":[]}`
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for _, mg := range gws {
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range attempts {
					r := mg.post(t, tok, "/anthropic/v1/messages", body, map[string]string{"X-Fake-Output": "50"})
					switch {
					case r.status == http.StatusOK:
						ok.Add(1)
					case r.status == http.StatusPaymentRequired && r.body == "budget exceeded\n":
						refused.Add(1)
					default:
						t.Errorf("unexpected answer %d %q", r.status, r.body)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if got := ok.Load(); got != limit/perReq {
		t.Errorf("%d requests let through, want exactly %d (the budget of %d at %d each)", got, limit/perReq, limit, perReq)
	}
	if int(ok.Load()) != up.count() {
		t.Errorf("provider served %d, gateways let through %d", up.count(), ok.Load())
	}
	for _, mg := range gws {
		if err := mg.m.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := gws[1].store.Budgets(context.Background(), metering.BudgetFilter{Scope: metering.ScopeRun})
	if err != nil || len(bs) != 1 {
		t.Fatalf("budgets %+v, %v", bs, err)
	}
	b := bs[0]
	if b.Spent.OutputTokens > limit || !b.Reserved.IsZero() || b.Spent.Requests != ok.Load() {
		t.Errorf("run budget after the race: %+v (let through %d)", b, ok.Load())
	}
}
