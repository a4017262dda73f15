package metering

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// What every Store implementation computes the same way, whatever its
// SQL: the checks and order of a reservation's budgets, and the sums a
// settlement applies.

// Negative reports whether some counter of u is negative.
func (u Usage) Negative() bool {
	return u.Requests < 0 || u.InputTokens < 0 || u.OutputTokens < 0
}

// CompareKeys orders budget keys by scope, key, period (byte order): the
// order a store locks budget rows in.
func CompareKeys(a, b BudgetKey) int {
	return cmp.Or(strings.Compare(a.Scope, b.Scope), strings.Compare(a.Key, b.Key), strings.Compare(a.Period, b.Period))
}

// SortedBudgets checks r (an id, no negative amount or limit, no budget
// twice) and returns its budgets in [CompareKeys] order, never nil.
func SortedBudgets(r Reservation) ([]Budget, error) {
	if r.ID == "" {
		return nil, errors.New("reservation id is empty")
	}
	if r.Amount.Negative() {
		return nil, fmt.Errorf("reservation %s: negative amount", r.ID)
	}
	budgets := slices.Clone(r.Budgets)
	if budgets == nil {
		budgets = []Budget{}
	}
	slices.SortFunc(budgets, func(a, b Budget) int { return CompareKeys(a.BudgetKey, b.BudgetKey) })
	for i, b := range budgets {
		if b.Limit.Negative() {
			return nil, fmt.Errorf("budget %s: negative limit", b.BudgetKey)
		}
		if i > 0 && budgets[i-1].BudgetKey == b.BudgetKey {
			return nil, fmt.Errorf("budget %s listed twice", b.BudgetKey)
		}
	}
	return budgets, nil
}

// Settled is a reservation a store has taken out of its open ones, to be
// applied: Amount released from each of Budgets' reserved, Actual added
// to their spent and to the usage row of Attribution.
type Settled struct {
	Budgets     []Budget
	Amount      Usage
	Actual      Usage
	Attribution Attribution
}

// BudgetDelta is what settling takes out of one budget's reserved
// (Release) and adds to its spent (Spend).
type BudgetDelta struct {
	Key            BudgetKey
	Release, Spend Usage
}

// SettleDeltas sums done and usage per budget (in CompareKeys order) and
// per usage row (in jti, provider, model, day order), so that a store
// writes each row once and in one order; rows of zero usage are dropped.
func SettleDeltas(done []Settled, usage []UsageDelta) ([]BudgetDelta, []UsageDelta) {
	byKey := map[BudgetKey]*BudgetDelta{}
	var order []BudgetKey
	byRow := map[Attribution]Usage{}
	for _, r := range done {
		for _, b := range r.Budgets {
			d := byKey[b.BudgetKey]
			if d == nil {
				d = &BudgetDelta{Key: b.BudgetKey}
				byKey[b.BudgetKey] = d
				order = append(order, b.BudgetKey)
			}
			d.Release = d.Release.Add(r.Amount)
			d.Spend = d.Spend.Add(r.Actual)
		}
		byRow[r.Attribution] = byRow[r.Attribution].Add(r.Actual)
	}
	for _, u := range usage {
		byRow[u.Attribution] = byRow[u.Attribution].Add(u.Used)
	}
	slices.SortFunc(order, CompareKeys)
	budgets := make([]BudgetDelta, 0, len(order))
	for _, k := range order {
		budgets = append(budgets, *byKey[k])
	}
	var rows []UsageDelta
	for a, u := range byRow {
		if !u.IsZero() {
			rows = append(rows, UsageDelta{Attribution: a, Used: u})
		}
	}
	slices.SortFunc(rows, func(x, y UsageDelta) int {
		return cmp.Or(strings.Compare(x.JTI, y.JTI), strings.Compare(x.Provider, y.Provider),
			strings.Compare(x.Model, y.Model), strings.Compare(x.Day, y.Day))
	})
	return budgets, rows
}

// GroupColumns checks names against [GroupFields] (which are also the
// usage rows' column names) and returns them in the order given, without
// repeats.
func GroupColumns(names []string) ([]string, error) {
	var out []string
	for _, g := range names {
		if !slices.Contains(GroupFields, g) {
			return nil, fmt.Errorf("unknown group field %q", g)
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out, nil
}
