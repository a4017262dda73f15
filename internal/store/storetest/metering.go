package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/metering"
)

// meterNow is the metering suite's "now" (milliseconds).
var meterNow = time.UnixMilli(1_800_000_000_123).UTC()

var (
	tokenKey  = metering.BudgetKey{Scope: metering.ScopeToken, Key: "jti-1"}
	runKey    = metering.BudgetKey{Scope: metering.ScopeRun, Key: metering.RunKey("agents", "coder", "run-1")}
	tenantKey = metering.BudgetKey{Scope: metering.ScopeTenant, Key: "agents", Period: metering.PeriodKey(metering.PeriodDay, meterNow)}
	meterAttr = metering.Attribution{JTI: "jti-1", RunID: "run-1", Tenant: "agents", Agent: "coder",
		Provider: "openai", Model: "o3-mini", Day: meterNow.Format(time.DateOnly)}
)

func budget(k metering.BudgetKey, limit metering.Usage) metering.Budget {
	return metering.Budget{BudgetKey: k, Limit: limit}
}

func reservation(id string, amount metering.Usage, budgets ...metering.Budget) metering.Reservation {
	return metering.Reservation{ID: id, Budgets: budgets, Amount: amount, Attribution: meterAttr,
		CreatedAt: meterNow, ExpiresAt: meterNow.Add(time.Minute)}
}

// budgetState returns k's row, failing t if there is none.
func budgetState(t testing.TB, s metering.Store, k metering.BudgetKey) metering.BudgetState {
	t.Helper()
	got, err := s.Budgets(context.Background(), metering.BudgetFilter{Scope: k.Scope, Key: k.Key, Period: k.Period})
	if err != nil {
		t.Fatalf("Budgets(%s) = %v", k, err)
	}
	for _, b := range got {
		if b.BudgetKey == k {
			return b
		}
	}
	t.Fatalf("Budgets(%s) = %+v: no such row", k, got)
	return metering.BudgetState{}
}

// wantBudget checks k's limit, reserved and spent counters.
func wantBudget(t testing.TB, s metering.Store, k metering.BudgetKey, limit, reserved, spent metering.Usage) {
	t.Helper()
	b := budgetState(t, s, k)
	if b.Limit != limit || b.Reserved != reserved || b.Spent != spent {
		t.Errorf("budget %s = limit %+v reserved %+v spent %+v, want limit %+v reserved %+v spent %+v",
			k, b.Limit, b.Reserved, b.Spent, limit, reserved, spent)
	}
}

// wantExceeded checks that err is an *ExceededError naming k, whose text
// is the fixed refusal.
func wantExceeded(t testing.TB, call string, err error, k metering.BudgetKey) {
	t.Helper()
	var ee *metering.ExceededError
	if !errors.As(err, &ee) || !errors.Is(err, metering.ErrBudgetExceeded) || ee.Budget != k || err.Error() != "budget exceeded" {
		t.Errorf("%s = %v (%T), want *ExceededError for %s", call, err, err, k)
	}
}

// totalUsage returns the sum of the usage rows matching f.
func totalUsage(t testing.TB, s metering.Store, f metering.UsageFilter) metering.Usage {
	t.Helper()
	rows, err := s.Usage(context.Background(), f)
	if err != nil {
		t.Fatalf("Usage(%+v) = %v", f, err)
	}
	var u metering.Usage
	for _, r := range rows {
		u = u.Add(r.Used)
	}
	return u
}

func mustReserve(t testing.TB, s metering.Store, r metering.Reservation) {
	t.Helper()
	if err := s.Reserve(context.Background(), r); err != nil {
		t.Fatalf("Reserve(%s) = %v", r.ID, err)
	}
}

func mustCommit(t testing.TB, s metering.Store, settles []metering.Settlement, usage []metering.UsageDelta) {
	t.Helper()
	if err := s.Commit(context.Background(), settles, usage); err != nil {
		t.Fatalf("Commit(%+v, %+v) = %v", settles, usage, err)
	}
}

// Metering checks a [metering.Store] on a fresh database per subtest:
// each counter's limit (zero: none), the limit rules (a token's or run's
// only falls, a tenant's is overwritten), a refused reservation changing
// nothing and naming its budget, Extend, Commit counting a settlement
// once and skipping unknown ids, SettleExpired, and the reads (Budgets
// ordered by scope, key, period; Usage filtered, grouped and ordered,
// one total row without GroupBy or none when nothing matches).
func Metering(t *testing.T, open func(testing.TB) metering.Store) {
	ctx := context.Background()
	counters := []struct {
		name string
		one  metering.Usage
	}{
		{"requests", metering.Usage{Requests: 1}},
		{"input_tokens", metering.Usage{InputTokens: 1}},
		{"output_tokens", metering.Usage{OutputTokens: 1}},
	}
	scale := func(u metering.Usage, n int64) metering.Usage {
		return metering.Usage{Requests: u.Requests * n, InputTokens: u.InputTokens * n, OutputTokens: u.OutputTokens * n}
	}
	t.Run("LimitEachCounter", func(t *testing.T) {
		for _, c := range counters {
			t.Run(c.name, func(t *testing.T) {
				s := open(t)
				limit := scale(c.one, 10)
				// Every other counter moves freely: only c is limited.
				amount := metering.Usage{Requests: 6, InputTokens: 6, OutputTokens: 6}
				mustReserve(t, s, reservation("a", amount, budget(tokenKey, limit)))
				wantExceeded(t, "Reserve(b, 5 more)", s.Reserve(ctx, reservation("b", metering.Usage{Requests: 5, InputTokens: 5, OutputTokens: 5}, budget(tokenKey, limit))), tokenKey)
				mustReserve(t, s, reservation("c", metering.Usage{Requests: 4, InputTokens: 4, OutputTokens: 4}, budget(tokenKey, limit)))
				wantBudget(t, s, tokenKey, limit, metering.Usage{Requests: 10, InputTokens: 10, OutputTokens: 10}, metering.Usage{})
				// Settled, the amount moves to spent and still counts.
				mustCommit(t, s, []metering.Settlement{{ID: "a", Actual: amount, Attribution: meterAttr}}, nil)
				wantExceeded(t, "Reserve(d) after commit", s.Reserve(ctx, reservation("d", c.one, budget(tokenKey, limit))), tokenKey)
				wantBudget(t, s, tokenKey, limit, metering.Usage{Requests: 4, InputTokens: 4, OutputTokens: 4}, amount)
			})
		}
	})

	t.Run("ZeroIsNoLimit", func(t *testing.T) {
		s := open(t)
		big := metering.Usage{Requests: 1 << 40, InputTokens: 1 << 50, OutputTokens: 1 << 50}
		for i := range 3 {
			mustReserve(t, s, reservation(fmt.Sprint("r", i), big, budget(tokenKey, metering.Usage{}), budget(tenantKey, metering.Usage{})))
		}
		wantBudget(t, s, tenantKey, metering.Usage{}, scale(big, 3), metering.Usage{})
		// A zero amount fits any budget that is not over its limit.
		mustReserve(t, s, reservation("zero", metering.Usage{}, budget(runKey, metering.Usage{Requests: 1})))
	})

	t.Run("TokenAndRunLimitsOnlyFall", func(t *testing.T) {
		for _, k := range []metering.BudgetKey{tokenKey, runKey} {
			t.Run(k.Scope, func(t *testing.T) {
				s := open(t)
				steps := []struct{ given, want metering.Usage }{
					{metering.Usage{Requests: 10}, metering.Usage{Requests: 10}},
					{metering.Usage{Requests: 20, InputTokens: 100}, metering.Usage{Requests: 10, InputTokens: 100}}, // min(0, x) = x
					{metering.Usage{}, metering.Usage{Requests: 10, InputTokens: 100}},
					{metering.Usage{Requests: 5, InputTokens: 200, OutputTokens: 7}, metering.Usage{Requests: 5, InputTokens: 100, OutputTokens: 7}},
				}
				for i, st := range steps {
					mustReserve(t, s, reservation(fmt.Sprint("r", i), metering.Usage{Requests: 1}, budget(k, st.given)))
					if got := budgetState(t, s, k).Limit; got != st.want {
						t.Errorf("after Reserve(r%d, limit %+v): limit = %+v, want %+v", i, st.given, got, st.want)
					}
				}
				// 4 reserved of a limit lowered to 5: a higher given limit does not let 2 more in.
				wantExceeded(t, "Reserve(over)", s.Reserve(ctx, reservation("over", metering.Usage{Requests: 2}, budget(k, metering.Usage{Requests: 50}))), k)
			})
		}
	})

	t.Run("TenantLimitIsOverwritten", func(t *testing.T) {
		s := open(t)
		for i, limit := range []metering.Usage{{Requests: 10}, {Requests: 20, OutputTokens: 5}, {Requests: 3}, {}} {
			mustReserve(t, s, reservation(fmt.Sprint("r", i), metering.Usage{}, budget(tenantKey, limit)))
			if got := budgetState(t, s, tenantKey).Limit; got != limit {
				t.Errorf("after Reserve(r%d, limit %+v): limit = %+v, want it", i, limit, got)
			}
		}
	})

	t.Run("ExceededChangesNothing", func(t *testing.T) {
		s := open(t)
		// runKey < tenantKey < tokenKey: the run and tenant rows are
		// updated before the token's refuses.
		mustReserve(t, s, reservation("first", metering.Usage{Requests: 2},
			budget(runKey, metering.Usage{Requests: 10}), budget(tenantKey, metering.Usage{Requests: 10}), budget(tokenKey, metering.Usage{Requests: 3})))
		newRun := metering.BudgetKey{Scope: metering.ScopeRun, Key: "new-run"}
		err := s.Reserve(ctx, reservation("second", metering.Usage{Requests: 2},
			budget(tokenKey, metering.Usage{Requests: 3}), budget(tenantKey, metering.Usage{Requests: 100}),
			budget(runKey, metering.Usage{Requests: 5}), budget(newRun, metering.Usage{})))
		wantExceeded(t, "Reserve(second)", err, tokenKey)
		wantBudget(t, s, runKey, metering.Usage{Requests: 10}, metering.Usage{Requests: 2}, metering.Usage{})
		wantBudget(t, s, tenantKey, metering.Usage{Requests: 10}, metering.Usage{Requests: 2}, metering.Usage{})
		wantBudget(t, s, tokenKey, metering.Usage{Requests: 3}, metering.Usage{Requests: 2}, metering.Usage{})
		if got, err := s.Budgets(ctx, metering.BudgetFilter{Key: newRun.Key}); err != nil || len(got) != 0 {
			t.Errorf("Budgets(new-run) = %+v, %v; want none (created by the refused reservation)", got, err)
		}
		if err := s.Extend(ctx, "second", metering.Usage{}); !errors.Is(err, metering.ErrNotFound) {
			t.Errorf("Extend(second) = %v, want ErrNotFound (not recorded)", err)
		}
	})

	t.Run("NoBudgets", func(t *testing.T) {
		s := open(t)
		mustReserve(t, s, reservation("r", metering.Usage{Requests: 1}))
		if err := s.Extend(ctx, "r", metering.Usage{InputTokens: 5}); err != nil {
			t.Errorf("Extend(r) = %v", err)
		}
		if n, err := s.SettleExpired(ctx, meterNow.Add(time.Hour)); n != 1 || err != nil {
			t.Errorf("SettleExpired() = %d, %v; want 1", n, err)
		}
		if got := totalUsage(t, s, metering.UsageFilter{}); got != (metering.Usage{Requests: 1, InputTokens: 5}) {
			t.Errorf("usage = %+v, want the amount", got)
		}
		if got, err := s.Budgets(ctx, metering.BudgetFilter{}); err != nil || len(got) != 0 {
			t.Errorf("Budgets() = %+v, %v; want none", got, err)
		}
	})

	t.Run("InvalidReservation", func(t *testing.T) {
		s := open(t)
		for name, r := range map[string]metering.Reservation{
			"empty id":        reservation("", metering.Usage{Requests: 1}),
			"negative amount": reservation("neg", metering.Usage{Requests: -1}, budget(tokenKey, metering.Usage{})),
			"budget twice":    reservation("dup", metering.Usage{Requests: 1}, budget(tokenKey, metering.Usage{}), budget(tokenKey, metering.Usage{})),
		} {
			if err := s.Reserve(ctx, r); err == nil || errors.Is(err, metering.ErrBudgetExceeded) {
				t.Errorf("Reserve(%s) = %v, want an error other than exceeded", name, err)
			}
		}
		mustReserve(t, s, reservation("r", metering.Usage{Requests: 1}))
		if err := s.Reserve(ctx, reservation("r", metering.Usage{Requests: 1})); err == nil {
			t.Errorf("Reserve(r) again = nil, want an error (id taken)")
		}
	})

	t.Run("Extend", func(t *testing.T) {
		s := open(t)
		limit := metering.Usage{InputTokens: 10}
		mustReserve(t, s, reservation("r", metering.Usage{Requests: 1, InputTokens: 3}, budget(tokenKey, limit), budget(runKey, metering.Usage{})))
		if err := s.Extend(ctx, "r", metering.Usage{InputTokens: 5}); err != nil {
			t.Fatalf("Extend(r, 5) = %v", err)
		}
		wantBudget(t, s, tokenKey, limit, metering.Usage{Requests: 1, InputTokens: 8}, metering.Usage{})
		wantExceeded(t, "Extend(r, 3)", s.Extend(ctx, "r", metering.Usage{InputTokens: 3}), tokenKey)
		wantBudget(t, s, tokenKey, limit, metering.Usage{Requests: 1, InputTokens: 8}, metering.Usage{})
		wantBudget(t, s, runKey, metering.Usage{}, metering.Usage{Requests: 1, InputTokens: 8}, metering.Usage{})
		if err := s.Extend(ctx, "nope", metering.Usage{InputTokens: 1}); !errors.Is(err, metering.ErrNotFound) {
			t.Errorf("Extend(nope) = %v, want ErrNotFound", err)
		}
		// Settling releases the extended amount, all of it.
		actual := metering.Usage{Requests: 1, InputTokens: 7, OutputTokens: 2}
		mustCommit(t, s, []metering.Settlement{{ID: "r", Actual: actual, Attribution: meterAttr}}, nil)
		wantBudget(t, s, tokenKey, limit, metering.Usage{}, actual)
		if err := s.Extend(ctx, "r", metering.Usage{InputTokens: 1}); !errors.Is(err, metering.ErrNotFound) {
			t.Errorf("Extend(r) after commit = %v, want ErrNotFound", err)
		}
		// Expired at the extended amount.
		mustReserve(t, s, reservation("e", metering.Usage{Requests: 1}, budget(runKey, metering.Usage{})))
		if err := s.Extend(ctx, "e", metering.Usage{OutputTokens: 4}); err != nil {
			t.Fatalf("Extend(e) = %v", err)
		}
		if n, err := s.SettleExpired(ctx, meterNow.Add(time.Hour)); n != 1 || err != nil {
			t.Errorf("SettleExpired() = %d, %v; want 1", n, err)
		}
		wantBudget(t, s, runKey, metering.Usage{}, metering.Usage{}, actual.Add(metering.Usage{Requests: 1, OutputTokens: 4}))
	})

	t.Run("CommitOnce", func(t *testing.T) {
		s := open(t)
		limit := metering.Usage{Requests: 10, InputTokens: 100}
		mustReserve(t, s, reservation("r", metering.Usage{Requests: 1, InputTokens: 50}, budget(tokenKey, limit), budget(tenantKey, metering.Usage{})))
		settledAttr := meterAttr
		settledAttr.Model = "o3-mini-2025-01-31"
		actual := metering.Usage{Requests: 1, InputTokens: 20, OutputTokens: 9}
		settle := metering.Settlement{ID: "r", Actual: actual, Attribution: settledAttr}
		mustCommit(t, s, []metering.Settlement{settle, settle}, nil)
		mustCommit(t, s, []metering.Settlement{settle}, nil)
		wantBudget(t, s, tokenKey, limit, metering.Usage{}, actual)
		wantBudget(t, s, tenantKey, metering.Usage{}, metering.Usage{}, actual)
		if got := totalUsage(t, s, metering.UsageFilter{Model: settledAttr.Model}); got != actual {
			t.Errorf("usage of the settled model = %+v, want %+v once", got, actual)
		}
		if got := totalUsage(t, s, metering.UsageFilter{Model: meterAttr.Model}); got != (metering.Usage{}) {
			t.Errorf("usage of the reserved model = %+v, want none (the settlement's attribution replaces it)", got)
		}
		// An unknown id is skipped; the usage deltas of the call are added.
		extra := metering.UsageDelta{Attribution: meterAttr, Used: metering.Usage{Requests: 2}}
		mustCommit(t, s, []metering.Settlement{{ID: "unknown", Actual: actual, Attribution: meterAttr}}, []metering.UsageDelta{extra, extra})
		wantBudget(t, s, tokenKey, limit, metering.Usage{}, actual)
		if got := totalUsage(t, s, metering.UsageFilter{}); got != actual.Add(metering.Usage{Requests: 4}) {
			t.Errorf("usage = %+v, want %+v", got, actual.Add(metering.Usage{Requests: 4}))
		}
		mustCommit(t, s, nil, nil)
		// Actual above the amount: spent may pass the limit, and then
		// nothing more fits (reserved never goes negative).
		mustReserve(t, s, reservation("big", metering.Usage{Requests: 1, InputTokens: 10}, budget(tokenKey, limit)))
		over := metering.Usage{Requests: 1, InputTokens: 90}
		mustCommit(t, s, []metering.Settlement{{ID: "big", Actual: over, Attribution: meterAttr}}, nil)
		wantBudget(t, s, tokenKey, limit, metering.Usage{}, actual.Add(over))
		wantExceeded(t, "Reserve(after overspend)", s.Reserve(ctx, reservation("more", metering.Usage{}, budget(tokenKey, limit))), tokenKey)
	})

	t.Run("SettleExpired", func(t *testing.T) {
		s := open(t)
		r1 := reservation("r1", metering.Usage{Requests: 1, InputTokens: 10}, budget(tokenKey, metering.Usage{}), budget(tenantKey, metering.Usage{}))
		r1.Attribution.Provider = "anthropic"
		r2 := reservation("r2", metering.Usage{Requests: 1, OutputTokens: 5}, budget(tokenKey, metering.Usage{}))
		r2.ExpiresAt = meterNow.Add(2 * time.Minute)
		mustReserve(t, s, r1)
		mustReserve(t, s, r2)
		if n, err := s.SettleExpired(ctx, r1.ExpiresAt); n != 0 || err != nil {
			t.Errorf("SettleExpired(r1's expiry) = %d, %v; want 0 (strictly before)", n, err)
		}
		if n, err := s.SettleExpired(ctx, r1.ExpiresAt.Add(time.Millisecond)); n != 1 || err != nil {
			t.Errorf("SettleExpired(after r1) = %d, %v; want 1", n, err)
		}
		if n, err := s.SettleExpired(ctx, r1.ExpiresAt.Add(time.Millisecond)); n != 0 || err != nil {
			t.Errorf("SettleExpired(after r1) again = %d, %v; want 0", n, err)
		}
		wantBudget(t, s, tokenKey, metering.Usage{}, r2.Amount, r1.Amount)
		wantBudget(t, s, tenantKey, metering.Usage{}, metering.Usage{}, r1.Amount)
		if got := totalUsage(t, s, metering.UsageFilter{Provider: "anthropic", JTI: meterAttr.JTI}); got != r1.Amount {
			t.Errorf("usage of r1's attribution = %+v, want %+v", got, r1.Amount)
		}
		// A late settlement of the expired reservation is skipped.
		mustCommit(t, s, []metering.Settlement{{ID: "r1", Actual: metering.Usage{Requests: 1, InputTokens: 99}, Attribution: meterAttr}}, nil)
		wantBudget(t, s, tokenKey, metering.Usage{}, r2.Amount, r1.Amount)
		if got := totalUsage(t, s, metering.UsageFilter{}); got != r1.Amount {
			t.Errorf("usage = %+v, want r1's amount only", got)
		}
	})

	t.Run("Usage", func(t *testing.T) {
		s := open(t)
		at := func(jti, tenant, agent, provider, model, day string) metering.Attribution {
			return metering.Attribution{JTI: jti, RunID: "run-" + jti, Tenant: tenant, Agent: agent, Provider: provider, Model: model, Day: day}
		}
		deltas := []metering.UsageDelta{
			{Attribution: at("j1", "t1", "a1", "openai", "o3", "2026-11-30"), Used: metering.Usage{Requests: 1, InputTokens: 10, OutputTokens: 1}},
			{Attribution: at("j1", "t1", "a1", "openai", "o3", "2026-12-01"), Used: metering.Usage{Requests: 2, InputTokens: 20, OutputTokens: 2}},
			{Attribution: at("j1", "t1", "a1", "openai", "gpt-5", "2026-12-01"), Used: metering.Usage{Requests: 4, InputTokens: 40, OutputTokens: 4}},
			{Attribution: at("j2", "t1", "a2", "anthropic", "claude", "2026-12-01"), Used: metering.Usage{Requests: 8, InputTokens: 80, OutputTokens: 8}},
			{Attribution: at("j3", "t2", "a1", "openai", "o3", "2026-12-02"), Used: metering.Usage{Requests: 16, InputTokens: 160, OutputTokens: 16}},
		}
		mustCommit(t, s, nil, deltas[:3])
		mustCommit(t, s, nil, deltas[3:])
		mustCommit(t, s, nil, deltas[1:2]) // summed into the same row
		u := func(n int64) metering.Usage { return metering.Usage{Requests: n, InputTokens: 10 * n, OutputTokens: n} }
		row := func(a metering.Attribution, n int64) metering.UsageRow {
			return metering.UsageRow{Attribution: a, Used: u(n)}
		}
		tests := []struct {
			name string
			f    metering.UsageFilter
			want []metering.UsageRow
		}{
			{"total", metering.UsageFilter{}, []metering.UsageRow{row(metering.Attribution{}, 33)}},
			{"total of nothing", metering.UsageFilter{Tenant: "t9"}, nil},
			{"grouped nothing", metering.UsageFilter{Tenant: "t9", GroupBy: []string{"tenant"}}, nil},
			{"by tenant", metering.UsageFilter{GroupBy: []string{"tenant"}}, []metering.UsageRow{
				row(metering.Attribution{Tenant: "t1"}, 17), row(metering.Attribution{Tenant: "t2"}, 16)}},
			{"by day of t1", metering.UsageFilter{Tenant: "t1", GroupBy: []string{"day"}}, []metering.UsageRow{
				row(metering.Attribution{Day: "2026-11-30"}, 1), row(metering.Attribution{Day: "2026-12-01"}, 16)}},
			{"since until", metering.UsageFilter{Since: "2026-12-01", Until: "2026-12-01", GroupBy: []string{"provider", "model"}}, []metering.UsageRow{
				row(metering.Attribution{Provider: "anthropic", Model: "claude"}, 8),
				row(metering.Attribution{Provider: "openai", Model: "gpt-5"}, 4),
				row(metering.Attribution{Provider: "openai", Model: "o3"}, 4)}},
			{"since", metering.UsageFilter{Since: "2026-12-02"}, []metering.UsageRow{row(metering.Attribution{}, 16)}},
			{"until", metering.UsageFilter{Until: "2026-11-30"}, []metering.UsageRow{row(metering.Attribution{}, 1)}},
			{"filters", metering.UsageFilter{JTI: "j1", RunID: "run-j1", Tenant: "t1", Agent: "a1", Provider: "openai", Model: "o3"}, []metering.UsageRow{row(metering.Attribution{}, 5)}},
			{"by agent then tenant", metering.UsageFilter{Provider: "openai", GroupBy: []string{"agent", "tenant"}}, []metering.UsageRow{
				row(metering.Attribution{Agent: "a1", Tenant: "t1"}, 9), row(metering.Attribution{Agent: "a1", Tenant: "t2"}, 16)}},
			{"by every field", metering.UsageFilter{JTI: "j2", GroupBy: metering.GroupFields}, []metering.UsageRow{row(deltas[3].Attribution, 8)}},
			{"by run", metering.UsageFilter{GroupBy: []string{"run_id", "jti"}}, []metering.UsageRow{
				row(metering.Attribution{RunID: "run-j1", JTI: "j1"}, 9), row(metering.Attribution{RunID: "run-j2", JTI: "j2"}, 8),
				row(metering.Attribution{RunID: "run-j3", JTI: "j3"}, 16)}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.Usage(ctx, tt.f)
				if err != nil || !slices.Equal(got, tt.want) {
					t.Errorf("Usage(%+v) = %+v, %v; want %+v", tt.f, got, err, tt.want)
				}
			})
		}
		if got, err := s.Usage(ctx, metering.UsageFilter{GroupBy: []string{"tenant", "budget"}}); err == nil {
			t.Errorf("Usage(GroupBy budget) = %+v, nil; want an error", got)
		}
	})

	t.Run("Budgets", func(t *testing.T) {
		s := open(t)
		keys := []metering.BudgetKey{
			{Scope: metering.ScopeToken, Key: "b"},
			{Scope: metering.ScopeTenant, Key: "t", Period: "month:2026-12"},
			{Scope: metering.ScopeRun, Key: "a/b/c"},
			{Scope: metering.ScopeTenant, Key: "t", Period: "day:2026-12-01"},
			{Scope: metering.ScopeToken, Key: "B"},
			{Scope: metering.ScopeTenant, Key: "s", Period: "day:2026-12-01"},
		}
		for i, k := range keys {
			mustReserve(t, s, reservation(fmt.Sprint("r", i), metering.Usage{Requests: 1}, budget(k, metering.Usage{Requests: int64(i + 1)})))
		}
		sorted := slices.Clone(keys)
		slices.SortFunc(sorted, func(a, b metering.BudgetKey) int {
			return cmpStrings(a.Scope, b.Scope, a.Key, b.Key, a.Period, b.Period)
		})
		tests := []struct {
			f    metering.BudgetFilter
			want []metering.BudgetKey
		}{
			{metering.BudgetFilter{}, sorted},
			{metering.BudgetFilter{Scope: metering.ScopeTenant}, sorted[1:4]},
			{metering.BudgetFilter{Key: "t"}, sorted[2:4]},
			{metering.BudgetFilter{Period: "day:2026-12-01"}, []metering.BudgetKey{sorted[1], sorted[2]}},
			{metering.BudgetFilter{Scope: metering.ScopeToken, Key: "b"}, sorted[5:]},
			{metering.BudgetFilter{Scope: "none"}, nil},
		}
		for _, tt := range tests {
			got, err := s.Budgets(ctx, tt.f)
			var gotKeys []metering.BudgetKey
			for _, b := range got {
				gotKeys = append(gotKeys, b.BudgetKey)
				if b.Updated.IsZero() || b.Reserved != (metering.Usage{Requests: 1}) {
					t.Errorf("budget %s = %+v, want Updated set and 1 request reserved", b.BudgetKey, b)
				}
			}
			if err != nil || !slices.Equal(gotKeys, tt.want) {
				t.Errorf("Budgets(%+v) = %v, %v; want %v", tt.f, gotKeys, err, tt.want)
			}
		}
	})
}

// cmpStrings compares pairs (a0, b0), (a1, b1), ... bytewise in turn.
func cmpStrings(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		switch {
		case pairs[i] < pairs[i+1]:
			return -1
		case pairs[i] > pairs[i+1]:
			return 1
		}
	}
	return 0
}

// MeteringReplicas races handles on one fresh database: goroutines on
// every handle reserve and commit on one budget limited to a number of
// requests, each reservation also holding other budgets listed in
// different orders (deadlocks show as errors). No more reservations
// succeed than fit, spent is what they used and reserved returns to
// zero. Then handles race SettleExpired, and Commit against it, on
// expired reservations: each is settled once.
func MeteringReplicas(t *testing.T, stores ...metering.Store) {
	t.Helper()
	if len(stores) < 2 {
		t.Fatalf("MeteringReplicas needs at least 2 handles, got %d", len(stores))
	}
	ctx := context.Background()
	const (
		limit        = 20
		perWorker    = 12
		workersPerDB = 4
	)
	// The limited budget is first in BudgetKey order: a store that
	// locked it only after checking it would let too many in.
	limited := metering.BudgetKey{Scope: metering.ScopeRun, Key: "a-limited"}
	others := []metering.Budget{
		budget(metering.BudgetKey{Scope: metering.ScopeRun, Key: "b-run"}, metering.Usage{InputTokens: 1 << 40}),
		budget(metering.BudgetKey{Scope: metering.ScopeToken, Key: "shared"}, metering.Usage{}),
		budget(metering.BudgetKey{Scope: metering.ScopeTenant, Key: "agents", Period: "day:2026-12-01"}, metering.Usage{OutputTokens: 1 << 40}),
	}
	amount := metering.Usage{Requests: 1, InputTokens: 100, OutputTokens: 50}
	actual := metering.Usage{Requests: 1, InputTokens: 30, OutputTokens: 70}
	var (
		wg        sync.WaitGroup
		succeeded atomic.Int64
		start     = make(chan struct{})
		reserved  sync.WaitGroup // every worker done reserving
	)
	workers := workersPerDB * len(stores)
	reserved.Add(workers)
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			// Odd reservations stay open until every worker is done
			// reserving, so that the limit is reached while many race
			// for its last units; even ones are committed at once.
			var held []metering.Settlement
			defer func() {
				reserved.Done()
				reserved.Wait()
				if err := s.Commit(ctx, held, nil); err != nil {
					t.Errorf("Commit(held) = %v", err)
				}
			}()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			<-start
			for i := range perWorker {
				budgets := append([]metering.Budget{budget(limited, metering.Usage{Requests: limit})}, others...)
				rng.Shuffle(len(budgets), func(a, b int) { budgets[a], budgets[b] = budgets[b], budgets[a] })
				r := reservation(fmt.Sprintf("w%d-%d", w, i), amount, budgets...)
				err := s.Reserve(ctx, r)
				var ee *metering.ExceededError
				if errors.As(err, &ee) {
					if ee.Budget != limited {
						t.Errorf("Reserve(%s) exceeded %s, want %s", r.ID, ee.Budget, limited)
					}
					continue
				}
				if err != nil {
					t.Errorf("Reserve(%s) = %v", r.ID, err)
					return
				}
				succeeded.Add(1)
				if i%2 == 1 {
					held = append(held, metering.Settlement{ID: r.ID, Actual: actual, Attribution: meterAttr})
					continue
				}
				if err := s.Commit(ctx, []metering.Settlement{{ID: r.ID, Actual: actual, Attribution: meterAttr}}, nil); err != nil {
					t.Errorf("Commit(%s) = %v", r.ID, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	n := succeeded.Load()
	if n < 1 || n > limit {
		t.Errorf("%d reservations succeeded, want 1 to %d", n, limit)
	}
	spent := metering.Usage{Requests: n, InputTokens: 30 * n, OutputTokens: 70 * n}
	wantBudget(t, stores[1], limited, metering.Usage{Requests: limit}, metering.Usage{}, spent)
	for _, b := range others {
		wantBudget(t, stores[0], b.BudgetKey, b.Limit, metering.Usage{}, spent)
	}
	if got := totalUsage(t, stores[0], metering.UsageFilter{}); got != spent {
		t.Errorf("usage = %+v, want %+v", got, spent)
	}

	// Expired reservations, settled by racing SettleExpired on every
	// handle and Commit on one.
	const expiring = 40
	expired := metering.BudgetKey{Scope: metering.ScopeRun, Key: "expired"}
	for i := range expiring {
		r := reservation(fmt.Sprint("x", i), amount, budget(expired, metering.Usage{}))
		r.Attribution.JTI = "expired"
		mustReserve(t, stores[i%len(stores)], r)
	}
	var settled atomic.Int64
	for w := range 2 * len(stores) {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for range 3 {
				n, err := s.SettleExpired(ctx, meterNow.Add(time.Hour))
				if err != nil {
					t.Errorf("SettleExpired() = %v", err)
					return
				}
				settled.Add(int64(n))
			}
		})
	}
	wg.Go(func() {
		for i := expiring - 1; i >= 0; i -= 2 {
			a := meterAttr
			a.JTI = "expired"
			if err := stores[0].Commit(ctx, []metering.Settlement{{ID: fmt.Sprint("x", i), Actual: amount, Attribution: a}}, nil); err != nil {
				t.Errorf("Commit(x%d) = %v", i, err)
			}
		}
	})
	wg.Wait()
	if n, err := stores[0].SettleExpired(ctx, meterNow.Add(time.Hour)); err != nil {
		t.Errorf("SettleExpired() after the race = %v", err)
	} else {
		settled.Add(int64(n))
	}
	if got := settled.Load(); got < expiring/2 || got > expiring {
		t.Errorf("SettleExpired settled %d in all, want %d to %d", got, expiring/2, expiring)
	}
	all := metering.Usage{Requests: expiring, InputTokens: 100 * expiring, OutputTokens: 50 * expiring}
	wantBudget(t, stores[0], expired, metering.Usage{}, metering.Usage{}, all)
	if got := totalUsage(t, stores[1], metering.UsageFilter{JTI: "expired"}); got != all {
		t.Errorf("usage of the expired reservations = %+v, want %+v (each once)", got, all)
	}
}
