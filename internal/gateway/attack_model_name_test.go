package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/store/postgres"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// FINDING (medium): the model a usage row is attributed to is the one
// the response names, as the provider (or a compatible server echoing
// the request's model) wrote it. PostgreSQL text refuses a NUL byte: the
// settlement or usage row carrying it never committed, and since the
// meter writes everything pending in one transaction, no usage was
// written again (every flush failed) and, past MaxPending, every request
// was refused.
func TestAttackModelNameWithNULPoisonsFlush(t *testing.T) {
	db, err := postgres.Open(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	up := newFakeProvider(t)
	mg := newMeteredGW(t, db, newKey(t), up, meteredOpts{})
	free := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents"})
	budgeted := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents", Budget: metering.Usage{Requests: 100}})
	for _, tok := range []string{free, budgeted} {
		for _, m := range []string{`gpt\x00fake`, `gpt\xfffake`} {
			if r := mg.post(t, tok, "/openai/v1/chat/completions", chatBody, map[string]string{"X-Fake-Model": m}); r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
		}
	}
	if r := mg.post(t, free, "/openai/v1/chat/completions", chatBody, nil); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// The meter's writer may be committing what a Flush then finds
	// gone: poll (every flush fails the test if it fails).
	deadline := time.Now().Add(5 * time.Second)
	got := mg.usage(t, metering.UsageFilter{Tenant: "agents"})
	for got.Requests != 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		got = mg.usage(t, metering.UsageFilter{Tenant: "agents"})
	}
	if got.Requests != 5 {
		t.Errorf("usage = %+v, want 5 requests", got)
	}
	bs, err := db.Budgets(context.Background(), metering.BudgetFilter{})
	if err != nil || len(bs) != 1 || bs[0].Spent.Requests != 2 || !bs[0].Reserved.IsZero() {
		t.Errorf("budgets = %+v, %v", bs, err)
	}
}
