package metering_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

func openStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The admin plane reads usage grouped as asked and budgets, and refuses
// what it does not know with 400.
func TestAdminHandler(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	day := time.Now().UTC().Format(time.DateOnly)
	err := db.Commit(ctx, nil, []metering.UsageDelta{
		{Attribution: metering.Attribution{JTI: "j1", RunID: "r1", Tenant: "t", Agent: "a", Provider: "openai", Model: "m1", Day: day}, Used: metering.Usage{1, 10, 20}},
		{Attribution: metering.Attribution{JTI: "j2", RunID: "r2", Tenant: "t", Agent: "a", Provider: "openai", Model: "m2", Day: day}, Used: metering.Usage{2, 30, 40}},
		{Attribution: metering.Attribution{JTI: "j3", RunID: "r3", Tenant: "u", Agent: "b", Provider: "anthropic", Model: "m1", Day: day}, Used: metering.Usage{1, 1, 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Reserve(ctx, metering.Reservation{ID: "x", Budgets: []metering.Budget{{BudgetKey: metering.BudgetKey{Scope: metering.ScopeTenant, Key: "t", Period: "day:" + day}, Limit: metering.Usage{Requests: 9}}},
		Amount: metering.Usage{Requests: 1}, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(metering.AdminHandler(db))
	defer srv.Close()
	get := func(q string) (int, []byte) {
		res, err := http.Get(srv.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b json.RawMessage
		json.NewDecoder(res.Body).Decode(&b)
		return res.StatusCode, b
	}
	code, b := get("/v1/gateway/usage?tenant=t&group_by=model")
	var u metering.UsageResponse
	if code != 200 || json.Unmarshal(b, &u) != nil || len(u.Usage) != 2 || u.Usage[0].Model != "m1" || u.Usage[1].Used != (metering.Usage{2, 30, 40}) {
		t.Errorf("usage by model of t: %d %s", code, b)
	}
	code, b = get("/v1/gateway/usage")
	if code != 200 || json.Unmarshal(b, &u) != nil || len(u.Usage) != 2 { // by tenant
		t.Errorf("usage by tenant: %d %s", code, b)
	}
	code, b = get("/v1/gateway/budgets?scope=tenant")
	var bs metering.BudgetsResponse
	if code != 200 || json.Unmarshal(b, &bs) != nil || len(bs.Budgets) != 1 || bs.Budgets[0].Reserved.Requests != 1 {
		t.Errorf("budgets: %d %s", code, b)
	}
	for _, q := range []string{
		"/v1/gateway/usage?group_by=secret",
		"/v1/gateway/usage?since=yesterday",
		"/v1/gateway/usage?tenant=t&tenant=u",
		"/v1/gateway/usage?jti_like=x",
		"/v1/gateway/budgets?scope=token&extra=1",
	} {
		if code, b := get(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, code, b)
		}
	}
}

// The meter's Prometheus counters move with what it counts, labelled by
// configured provider or "other".
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	mm, err := metering.NewMetrics(reg, []string{"openai"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metering.New(metering.Options{Store: openStore(t), Metrics: mm,
		Policy: metering.Policy{Token: metering.Usage{Requests: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	ctx := context.Background()
	for _, p := range []string{"openai", "made-up"} {
		tk, err := m.Begin(ctx, metering.Attribution{JTI: "j-" + p, Provider: p}, nil, metering.Usage{})
		if err != nil {
			t.Fatal(err)
		}
		tk.Settle(ctx, metering.Usage{1, 5, 7}, "m")
	}
	bs := m.Budgets(metering.Claims{JTI: "j"})
	for i := range 2 {
		tk, err := m.Begin(ctx, metering.Attribution{JTI: "j", Provider: "openai"}, bs, metering.Usage{Requests: 1})
		if i == 1 {
			if err == nil {
				t.Fatal("second request over a token budget of 1 was let through")
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tk.Settle(ctx, metering.Usage{Requests: 1}, "m")
	}
	for _, c := range []struct {
		provider, counter string
		want              float64
	}{{"openai", "output_tokens", 7}, {"openai", "requests", 2}, {"other", "input_tokens", 5}} {
		if got := testutil.ToFloat64(mustCounter(t, reg, c.provider, c.counter)); got != c.want {
			t.Errorf("usage %s %s = %v, want %v", c.provider, c.counter, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "custody_gateway_budget_refusals_total"); err != nil || n != 1 {
		t.Errorf("refusal series = %d, %v", n, err)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, provider, counter string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "custody_gateway_usage_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["counter"] == counter {
				v := m.GetCounter().GetValue()
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return v })
			}
		}
	}
	t.Fatalf("no usage series %s %s", provider, counter)
	return nil
}
