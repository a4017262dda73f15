package metering

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Usage counts what requests used: the unit of limits, reservations,
// spend and usage rows. Zero is nothing used.
type Usage struct {
	// Requests forwarded to a provider.
	Requests int64 `json:"requests"`
	// InputTokens: every prompt token the provider processed, cached
	// ones included (Anthropic input_tokens + cache_read_input_tokens +
	// cache_creation_input_tokens, OpenAI prompt_tokens or input_tokens,
	// Gemini promptTokenCount + toolUsePromptTokenCount).
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens: completion tokens, reasoning included (Anthropic
	// output_tokens, OpenAI completion_tokens or output_tokens, Gemini
	// candidatesTokenCount + thoughtsTokenCount).
	OutputTokens int64 `json:"output_tokens"`
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.Requests + v.Requests, u.InputTokens + v.InputTokens, u.OutputTokens + v.OutputTokens}
}

// IsZero reports whether u counts nothing.
func (u Usage) IsZero() bool { return u == Usage{} }

// Scopes a budget applies to.
const (
	// ScopeToken: one gateway token; the key is its jti.
	ScopeToken = "token"
	// ScopeRun: one run; the key is RunKey(tenant, agent, run_id).
	ScopeRun = "run"
	// ScopeTenant: one tenant in one period; the key is the tenant.
	ScopeTenant = "tenant"
)

// BudgetKey names one budget row: Scope, Key and, for ScopeTenant, the
// Period it counts ("day:2026-12-01" or "month:2026-12", UTC; see
// [PeriodKey]); "" for the other scopes.
type BudgetKey struct {
	Scope  string `json:"scope"`
	Key    string `json:"key"`
	Period string `json:"period,omitempty"`
}

func (k BudgetKey) String() string {
	if k.Period == "" {
		return k.Scope + " " + k.Key
	}
	return k.Scope + " " + k.Key + " " + k.Period
}

// RunKey is the Key of a run's budget: tenant, agent and run_id joined
// by "/", each with "%" and "/" percent-encoded so that two different
// runs never share a key.
func RunKey(tenant, agent, run string) string {
	return escapeSlash(tenant) + "/" + escapeSlash(agent) + "/" + escapeSlash(run)
}

func escapeSlash(s string) string {
	if !strings.ContainsAny(s, "%/") {
		return s
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(s)
}

// Periods a tenant budget counts over, UTC.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// PeriodKey is the BudgetKey.Period of the period that holds t:
// "day:2006-01-02" or "month:2006-01" (UTC). period is PeriodDay or
// PeriodMonth; anything else is "".
func PeriodKey(period string, t time.Time) string {
	t = t.UTC()
	switch period {
	case PeriodDay:
		return "day:" + t.Format(time.DateOnly)
	case PeriodMonth:
		return "month:" + t.Format("2006-01")
	}
	return ""
}

// Budget is one limit: a row a [Reservation] must fit in. A zero field
// of Limit means no limit on that counter.
type Budget struct {
	BudgetKey
	Limit Usage `json:"limit"`
}

// BudgetState is a budget row as the store holds it.
type BudgetState struct {
	Budget
	// Reserved is what open reservations hold; Spent what settled ones
	// used.
	Reserved Usage     `json:"reserved"`
	Spent    Usage     `json:"spent"`
	Updated  time.Time `json:"updated_at"`
}

// Attribution says whose use a usage row counts: the token's claims,
// the provider and model and the UTC day.
type Attribution struct {
	JTI      string `json:"jti"`
	RunID    string `json:"run_id,omitempty"`
	Tenant   string `json:"tenant,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Provider string `json:"provider"`
	// Model as the response names it, else as the request did, else "".
	Model string `json:"model,omitempty"`
	// Day is the UTC day the request started, "2026-12-01".
	Day string `json:"day"`
}

// Reservation holds Amount of every budget in Budgets for one request
// until it is settled, or until ExpiresAt, when [Store.SettleExpired]
// settles it at Amount (its replica went away).
type Reservation struct {
	// ID is unique (random, from the reserving replica).
	ID      string
	Budgets []Budget
	Amount  Usage
	// Attribution is where the settled usage is counted when the
	// reservation expires unsettled.
	Attribution Attribution
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// Settlement closes one reservation with what its request used.
type Settlement struct {
	ID     string
	Actual Usage
	// Attribution replaces the reservation's (the model is known now).
	Attribution Attribution
}

// UsageDelta adds Used to the usage row of Attribution.
type UsageDelta struct {
	Attribution
	Used Usage
}

// UsageRow is an aggregate of usage rows (see [UsageFilter.GroupBy]).
type UsageRow struct {
	Attribution
	Used Usage `json:"used"`
}

// UsageFilter selects usage rows: an empty field matches any value.
// Since and Until are UTC days, inclusive ("" for unbounded). GroupBy
// names the Attribution fields kept in the result, from "jti",
// "run_id", "tenant", "agent", "provider", "model", "day"; the others
// are "" in the rows returned, which are summed over them and ordered by
// the kept fields (in GroupBy's order). Without GroupBy the result is
// one row, the total, or none when no usage row matches; a name not in
// [GroupFields] is an error.
type UsageFilter struct {
	JTI, RunID, Tenant, Agent, Provider, Model string
	Since, Until                               string
	GroupBy                                    []string
}

// GroupFields are the names [UsageFilter.GroupBy] accepts.
var GroupFields = []string{"jti", "run_id", "tenant", "agent", "provider", "model", "day"}

// BudgetFilter selects budget rows: an empty field matches any value.
type BudgetFilter struct {
	Scope, Key, Period string
}

// ErrBudgetExceeded: a reservation or extension does not fit in a
// budget. Its text is the fixed refusal "budget exceeded".
var ErrBudgetExceeded = errors.New("budget exceeded")

// ErrNotFound: no open reservation has the id.
var ErrNotFound = errors.New("metering: reservation not found")

// ExceededError says which budget a reservation did not fit in. It
// wraps [ErrBudgetExceeded]; its text is that of ErrBudgetExceeded
// alone, so that it can be shown to a sandbox as is.
type ExceededError struct {
	Budget BudgetKey
}

func (e *ExceededError) Error() string { return ErrBudgetExceeded.Error() }
func (e *ExceededError) Unwrap() error { return ErrBudgetExceeded }

// Detail names the budget, for logs and the operator.
func (e *ExceededError) Detail() string { return fmt.Sprintf("budget exceeded: %s", e.Budget) }

// Store keeps budgets, open reservations and usage. Implementations must
// be safe for concurrent use from several processes on one database
// (replicas), decide every check against the committed rows (never a
// cached view), and be durable when a write returns.
//
// Reserve, in one transaction: for each of r.Budgets, creates its row if
// there is none (counters zero) and sets its limits — for ScopeTenant to
// the given ones; for ScopeToken and ScopeRun to the smaller of the
// stored and the given one on each counter, zero meaning none (a
// token's or run's limit never rises once set). Then every limited
// counter must satisfy spent + reserved + r.Amount <= limit; if all do,
// r.Amount is added to each row's reserved and r is recorded; otherwise
// nothing changes and the error is an [*ExceededError] naming a budget
// that did not fit. (Rows are best locked in BudgetKey order, so that
// two reservations on the same budgets cannot deadlock.)
//
// Extend adds more to the open reservation id's amount and to its
// budgets' reserved under the same check, with the limits as stored; it
// returns an *ExceededError (nothing changed) or [ErrNotFound].
//
// Commit, in one transaction, settles each of settles whose reservation
// is open — its budgets' reserved minus the reservation's amount,
// spent plus Actual, the reservation deleted, Actual added to the usage
// row of its Attribution — skipping (no error) those that are not open
// (already settled or expired: a request is counted once), and adds
// each of usage to its usage row.
//
// SettleExpired settles every reservation with ExpiresAt before before at
// its amount, attributed as reserved, and returns how many.
//
// Budgets and Usage read the committed rows; Budgets orders by scope,
// key, period.
type Store interface {
	Reserve(ctx context.Context, r Reservation) error
	Extend(ctx context.Context, id string, more Usage) error
	Commit(ctx context.Context, settles []Settlement, usage []UsageDelta) error
	SettleExpired(ctx context.Context, before time.Time) (int, error)
	Budgets(ctx context.Context, f BudgetFilter) ([]BudgetState, error)
	Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error)
}
