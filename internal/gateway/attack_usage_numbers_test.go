package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// FINDING (medium): usage numbers a provider reports were taken as they
// came. A negative count settled a budget's spent below what was used
// (a refund), or below zero, which the store's CHECK refuses: that
// settlement failed, was queued, and every later flush (one transaction
// with it) failed too, so no usage was written again and, past
// MaxPending, every request was refused. A count near 2^63 overflowed.
func TestAttackProviderUsageNumbers(t *testing.T) {
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"anthropic", "openai"}, Tenant: "agents", Budget: metering.Usage{OutputTokens: 1000}})
	free := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents"})

	// 900 of 1000 spent.
	if r := mg.post(t, tok, "/anthropic/v1/messages", strings.Replace(anthropicBody, `"max_tokens":100`, `"max_tokens":900`, 1), map[string]string{"X-Fake-Output": "900"}); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// A response reporting negative usage must not give it back.
	if r := mg.post(t, tok, "/anthropic/v1/messages", anthropicBody, map[string]string{"X-Fake-Output": "-100000", "X-Fake-Input": "-5"}); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// Nor break the writer for the requests without a budget.
	if r := mg.post(t, free, "/openai/v1/chat/completions", chatBody, map[string]string{"X-Fake-Output": "9223372036854775807", "X-Fake-Input": "9223372036854775807"}); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r := mg.post(t, free, "/openai/v1/chat/completions", chatBody, map[string]string{"X-Fake-Output": "9223372036854775807"}); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	u := mg.usage(t, metering.UsageFilter{Tenant: "agents"}) // flushes: fails the test on a store error
	if u.InputTokens < 0 || u.OutputTokens < 900 {
		t.Errorf("usage = %+v: negative or lost", u)
	}
	bs, err := st.Budgets(context.Background(), metering.BudgetFilter{Scope: metering.ScopeToken})
	if err != nil || len(bs) != 1 {
		t.Fatalf("budgets %+v, %v", bs, err)
	}
	if bs[0].Spent.OutputTokens < 900 || bs[0].Spent.InputTokens < 0 {
		t.Errorf("spent = %+v: negative usage refunded the budget", bs[0].Spent)
	}
	if r := mg.post(t, tok, "/anthropic/v1/messages", anthropicBody, nil); r.status != http.StatusPaymentRequired {
		t.Errorf("100 more over 900 spent of 1000 (+ the bad response's reservation): %d %s", r.status, r.body)
	}
}

// FINDING (medium), the same overflow from the request side: a declared
// maximum of 2^53 tokens times n=512 was reserved as 2^62 on a budget
// whose output is not limited (a request-count budget), and a stream the
// client aborts is charged its reservation: two such aborts overflowed
// the budget's spent (PostgreSQL: bigint out of range, a settlement that
// never commits and blocks every later flush; SQLite: a REAL in an
// INTEGER column that no longer reads back).
func TestAttackHugeReservationOverflow(t *testing.T) {
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Budget: metering.Usage{Requests: 100}})
	body := strings.Replace(chatStream, `"stream":true`, `"stream":true,"max_tokens":9007199254740992,"n":512`, 1)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, mg.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Fake-Delay", "100ms")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%d", res.StatusCode)
		}
		buf := make([]byte, 10)
		io.ReadFull(res.Body, buf)
		res.Body.Close() // aborted mid-stream: charged its reservation
	}
	deadline := time.Now().Add(5 * time.Second)
	for mg.usage(t, metering.UsageFilter{}).Requests < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	bs, err := st.Budgets(context.Background(), metering.BudgetFilter{})
	if err != nil || len(bs) != 1 {
		t.Fatalf("budgets %+v, %v", bs, err)
	}
	if s := bs[0].Spent; s.Requests != 2 || s.OutputTokens < 0 || s.OutputTokens > 2*metering.MaxReported {
		t.Errorf("spent = %+v", s)
	}
}
