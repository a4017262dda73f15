package metering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Policy is the operator's budgets: per tenant per period, and caps on
// every run and every token. A zero limit counter means none.
//
// Its file form (serve --gateway-budgets FILE) is JSON:
//
//	{
//	  "tenants": {"agents": {"period": "day", "output_tokens": 2000000}},
//	  "default_tenant": {"period": "month", "requests": 100000},
//	  "run":   {"output_tokens": 200000},
//	  "token": {"requests": 500}
//	}
//
// Each limit object has "requests", "input_tokens" and "output_tokens"
// (non-negative integers, absent or 0 for none); a tenant's also has
// "period", "day" or "month" (UTC). Unknown members are errors.
type Policy struct {
	// Tenants are budgets of named tenants (a sandbox's namespace).
	Tenants map[string]TenantBudget `json:"tenants,omitempty"`
	// DefaultTenant, if set, is the budget of every tenant not in
	// Tenants (each tenant counted on its own); tokens minted without a
	// tenant share one such budget, under the tenant "".
	DefaultTenant *TenantBudget `json:"default_tenant,omitempty"`
	// Run caps every run's budget: the budget of a run is the smaller,
	// counter by counter, of this and what its tokens were minted with.
	Run Usage `json:"run"`
	// Token caps every token's budget likewise.
	Token Usage `json:"token"`
}

// TenantBudget is one tenant's limit per Period ([PeriodDay] or
// [PeriodMonth]).
type TenantBudget struct {
	Period string `json:"period"`
	Usage
}

// Validate checks p: periods known, counters non-negative, tenant names
// 1 to 253 bytes.
func (p Policy) Validate() error {
	check := func(what string, u Usage) error {
		if u.Requests < 0 || u.InputTokens < 0 || u.OutputTokens < 0 {
			return fmt.Errorf("%s: limits must not be negative", what)
		}
		return nil
	}
	tb := func(what string, b TenantBudget) error {
		if b.Period != PeriodDay && b.Period != PeriodMonth {
			return fmt.Errorf("%s: period %q: want %q or %q", what, b.Period, PeriodDay, PeriodMonth)
		}
		return check(what, b.Usage)
	}
	for name, b := range p.Tenants {
		if name == "" || len(name) > 253 {
			return fmt.Errorf("tenants: name %q: want 1 to 253 bytes", name)
		}
		if err := tb("tenants."+name, b); err != nil {
			return err
		}
	}
	if p.DefaultTenant != nil {
		if err := tb("default_tenant", *p.DefaultTenant); err != nil {
			return err
		}
	}
	if err := check("run", p.Run); err != nil {
		return err
	}
	return check("token", p.Token)
}

// LoadPolicy reads a policy file (see [Policy]) and validates it.
func LoadPolicy(path string) (Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, err
	}
	return ParsePolicy(b)
}

// ParsePolicy parses and validates a policy file's content.
func ParsePolicy(b []byte) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("budget policy: %w", err)
	}
	if dec.More() {
		return Policy{}, fmt.Errorf("budget policy: more than one JSON value")
	}
	if err := p.Validate(); err != nil {
		return Policy{}, fmt.Errorf("budget policy: %w", err)
	}
	return p, nil
}

// tenant is the budget of tenant, if any. Tokens minted without a tenant
// ("") share one budget under DefaultTenant, so that leaving the tenant
// out does not escape it.
func (p Policy) tenant(tenant string) (TenantBudget, bool) {
	if b, ok := p.Tenants[tenant]; ok && tenant != "" {
		return b, !b.Usage.IsZero()
	}
	if p.DefaultTenant != nil {
		return *p.DefaultTenant, !p.DefaultTenant.Usage.IsZero()
	}
	return TenantBudget{}, false
}

// minLimit is a and b counter by counter, the smaller where both limit
// (0 meaning none).
func minLimit(a, b Usage) Usage {
	m := func(x, y int64) int64 {
		switch {
		case x == 0:
			return y
		case y == 0:
			return x
		}
		return min(x, y)
	}
	return Usage{m(a.Requests, b.Requests), m(a.InputTokens, b.InputTokens), m(a.OutputTokens, b.OutputTokens)}
}

// Claims are what a token says of its own budgets, from its claims as
// minted (gateway token claims "budget" and "run_budget").
type Claims struct {
	JTI, RunID, Tenant, Agent string
	Token, Run                Usage
}

// Budgets are the budgets a request of a token with claims c must fit
// in at t: the token's, its run's (if it has a run_id) and its tenant's
// for the period holding t, each only where some counter is limited.
func (p Policy) Budgets(c Claims, t time.Time) []Budget {
	var out []Budget
	if l := minLimit(p.Token, c.Token); !l.IsZero() {
		out = append(out, Budget{BudgetKey{Scope: ScopeToken, Key: c.JTI}, l})
	}
	if c.RunID != "" {
		if l := minLimit(p.Run, c.Run); !l.IsZero() {
			out = append(out, Budget{BudgetKey{Scope: ScopeRun, Key: RunKey(c.Tenant, c.Agent, c.RunID)}, l})
		}
	}
	if b, ok := p.tenant(c.Tenant); ok {
		out = append(out, Budget{BudgetKey{Scope: ScopeTenant, Key: c.Tenant, Period: PeriodKey(b.Period, t)}, b.Usage})
	}
	return out
}
