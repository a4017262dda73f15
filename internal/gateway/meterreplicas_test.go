package gateway_test

import (
	"context"
	"net/http"
	"strconv"
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
	t.Run("provider keeps to max_tokens", func(t *testing.T) { raceOneBudget(t, 50) })
	// A provider that reports more than the request's max_tokens (an
	// OpenAI-compatible server ignoring it): each request is admitted on
	// its reservation, so the spend may pass the budget by what the
	// requests in flight at the crossing used over their reservations,
	// never by more than one request per client.
	t.Run("provider overruns max_tokens", func(t *testing.T) { raceOneBudget(t, 80) })
}

func raceOneBudget(t *testing.T, reported int) {
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
					r := mg.post(t, tok, "/anthropic/v1/messages", body, map[string]string{"X-Fake-Output": strconv.Itoa(reported)})
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
	if reported == perReq {
		if got := ok.Load(); got != limit/perReq {
			t.Errorf("%d requests let through, want exactly %d (the budget of %d at %d each)", got, limit/perReq, limit, perReq)
		}
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
	bound := int64(limit)
	if reported > perReq {
		bound += replicas * clients * int64(reported) // one request in flight per client
	}
	if b.Spent.OutputTokens > bound || !b.Reserved.IsZero() || b.Spent.Requests != ok.Load() ||
		b.Spent.OutputTokens != ok.Load()*int64(reported) {
		t.Errorf("run budget after the race: %+v (let through %d, bound %d)", b, ok.Load(), bound)
	}
	t.Logf("%d let through, %d output tokens spent of a budget of %d", ok.Load(), b.Spent.OutputTokens, limit)
}
