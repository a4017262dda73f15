package verify

import (
	"fmt"
	"math"
)

// reconciliation is what Verify checks of a run's model calls and its
// run.reconciled record, offline:
//
//   - each model.call record lists tool_uses as objects with a name, and
//     tool_uses_dropped (if present) is a count;
//   - a run with model.call records that is closed holds exactly one
//     run.reconciled, immediately before run.closing (an open run holds
//     none);
//   - run.reconciled's model_calls and tool_uses equal what the run's
//     model.call records hold (listed uses plus dropped ones);
//   - every entry of its unreported list names a model.call record of the
//     run by index, a position in its tool_uses and that use's name, each
//     at most once, and unreported_count is at least the list's length and
//     at most tool_uses;
//   - its unreadable_responses equals the number of the run's model.call
//     records with response_malformed (responses that could not be read
//     for tool uses, which may hide any);
//   - its repeated list and repeated_count, present together or not at
//     all (then 0): each entry names a use by index, pos and tool, at
//     most once and not in the unreported list, and the other use it
//     repeats by of_index and of_pos; both records name the same
//     response_id, both uses the same id and tool; the use repeated
//     carries args_commitment, and the repeat either does too and is a
//     retrieve's (model.call method GET) or carries none (its arguments
//     could not be read, e.g. a stream cut in them); the count is at
//     least the list's length, and unreported_count plus repeated_count
//     is at most tool_uses.
//
// Which use matched which decision, and whether a repeat's arguments
// equal those of the use it repeats, cannot be checked offline (the
// commitments are salted apart); the signer's count is what Result
// reports.
type reconciliation struct {
	modelCalls int
	malformed  int // model.call records with response_malformed
	toolUses   int64
	uses       map[int64]*callUses // by model.call index
	reconciled bool
	unreported int
	unreadable int
	repeated   int
}

// callUses is what a model.call record says of its tool uses.
type callUses struct {
	names      []string // tool names by position
	ids        []string // use ids by position ("" if none)
	readable   []bool   // the use carries args_commitment
	responseID string   // response_id, "" if none
	retrieve   bool     // method GET
}

// add takes the run's records in order; next is the record after r (nil
// for the last).
func (rc *reconciliation) add(r *Record, next *Record) error {
	switch r.Type {
	case TypeModelCall:
		if rc.reconciled {
			return fmt.Errorf("%w: model.call after run.reconciled", ErrReconcile)
		}
		list, ok := r.Body["tool_uses"].([]any)
		if !ok {
			return fmt.Errorf("%w: model.call without a tool_uses list", ErrReconcile)
		}
		cu := &callUses{names: make([]string, len(list)), ids: make([]string, len(list)), readable: make([]bool, len(list))}
		cu.responseID, _ = r.Body["response_id"].(string)
		cu.retrieve = r.Body["method"] == "GET"
		names := cu.names
		for i, u := range list {
			m, ok := u.(map[string]any)
			name, _ := m["name"].(string)
			if !ok || name == "" {
				return fmt.Errorf("%w: model.call tool use %d has no name", ErrReconcile, i)
			}
			names[i] = name
			cu.ids[i], _ = m["id"].(string)
			_, cu.readable[i] = m["args_commitment"].(string)
		}
		dropped := int64(0)
		if v, ok := r.Body["tool_uses_dropped"]; ok {
			if dropped, ok = v.(int64); !ok || dropped < 0 {
				return fmt.Errorf("%w: model.call tool_uses_dropped is not a count", ErrReconcile)
			}
		}
		if rc.uses == nil {
			rc.uses = map[int64]*callUses{}
		}
		rc.uses[r.Index] = cu
		rc.modelCalls++
		if v, ok := r.Body["response_malformed"]; ok {
			if v != true {
				return fmt.Errorf("%w: model.call response_malformed is not true", ErrReconcile)
			}
			rc.malformed++
		}
		// A count is at most 2^53-1 (canonical JSON), so a run of
		// enough records could still overflow the sum.
		add := int64(len(names)) + dropped
		if add > math.MaxInt64-rc.toolUses {
			return fmt.Errorf("%w: the run's tool use count overflows", ErrReconcile)
		}
		rc.toolUses += add
	case TypeRunReconciled:
		if rc.reconciled {
			return fmt.Errorf("%w: two run.reconciled records", ErrReconcile)
		}
		if next == nil || next.Type != TypeRunClosing {
			return fmt.Errorf("%w: run.reconciled not immediately before run.closing", ErrReconcile)
		}
		rc.reconciled = true
		return rc.check(r)
	case TypeRunClosing:
		if rc.modelCalls > 0 && !rc.reconciled {
			return fmt.Errorf("%w: the run recorded %d model calls and closed without run.reconciled", ErrReconcile, rc.modelCalls)
		}
	}
	return nil
}

func (rc *reconciliation) check(r *Record) error {
	count := func(k string) (int64, error) {
		v, ok := r.Body[k].(int64)
		if !ok || v < 0 {
			return 0, fmt.Errorf("%w: run.reconciled %s is not a count", ErrReconcile, k)
		}
		return v, nil
	}
	calls, err := count("model_calls")
	if err != nil {
		return err
	}
	uses, err := count("tool_uses")
	if err != nil {
		return err
	}
	if _, err := count("decided_calls"); err != nil {
		return err
	}
	n, err := count("unreported_count")
	if err != nil {
		return err
	}
	unreadable, err := count("unreadable_responses")
	if err != nil {
		return err
	}
	if unreadable != int64(rc.malformed) {
		return fmt.Errorf("%w: run.reconciled counts %d unreadable responses, the run's model.call records %d", ErrReconcile, unreadable, rc.malformed)
	}
	if calls != int64(rc.modelCalls) || uses != rc.toolUses {
		return fmt.Errorf("%w: run.reconciled counts %d model calls and %d tool uses, the run's records %d and %d",
			ErrReconcile, calls, uses, rc.modelCalls, rc.toolUses)
	}
	list, ok := r.Body["unreported"].([]any)
	if !ok || int64(len(list)) > n || n > uses {
		return fmt.Errorf("%w: run.reconciled unreported list or count out of range", ErrReconcile)
	}
	seen := map[[2]int64]bool{}
	for i, e := range list {
		m, _ := e.(map[string]any)
		idx, ok1 := m["index"].(int64)
		pos, ok2 := m["pos"].(int64)
		tool, ok3 := m["tool"].(string)
		if !ok1 || !ok2 || !ok3 || !rc.names(idx, pos, tool) || seen[[2]int64{idx, pos}] {
			return fmt.Errorf("%w: unreported entry %d does not name a tool use of the run's model.call records", ErrReconcile, i)
		}
		seen[[2]int64{idx, pos}] = true
	}
	repeated, err := rc.checkRepeated(r, seen)
	if err != nil {
		return err
	}
	if n > uses-repeated {
		return fmt.Errorf("%w: run.reconciled counts more unreported and repeated tool uses than tool uses", ErrReconcile)
	}
	rc.unreported, rc.unreadable, rc.repeated = int(n), int(unreadable), int(repeated)
	return nil
}

// names reports whether the run's model.call record at idx has a tool
// use of tool at pos.
func (rc *reconciliation) names(idx, pos int64, tool string) bool {
	cu, ok := rc.uses[idx]
	return ok && pos >= 0 && pos < int64(len(cu.names)) && cu.names[pos] == tool
}

// checkRepeated checks run.reconciled's repeated list and count (see
// reconciliation) and returns the count; unreported holds the uses its
// unreported list names.
func (rc *reconciliation) checkRepeated(r *Record, unreported map[[2]int64]bool) (int64, error) {
	v, hasCount := r.Body["repeated_count"]
	lv, hasList := r.Body["repeated"]
	if !hasCount && !hasList {
		return 0, nil
	}
	n, ok1 := v.(int64)
	list, ok2 := lv.([]any)
	if !hasCount || !hasList || !ok1 || !ok2 || n < 0 || int64(len(list)) > n {
		return 0, fmt.Errorf("%w: run.reconciled repeated list or count out of range", ErrReconcile)
	}
	seen := map[[2]int64]bool{}
	for i, e := range list {
		m, _ := e.(map[string]any)
		idx, ok1 := m["index"].(int64)
		pos, ok2 := m["pos"].(int64)
		tool, ok3 := m["tool"].(string)
		ofIdx, ok4 := m["of_index"].(int64)
		ofPos, ok5 := m["of_pos"].(int64)
		k, of := [2]int64{idx, pos}, [2]int64{ofIdx, ofPos}
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !rc.names(idx, pos, tool) || !rc.names(ofIdx, ofPos, tool) ||
			k == of || seen[k] || unreported[k] {
			return 0, fmt.Errorf("%w: repeated entry %d does not name two tool uses of the run's model.call records", ErrReconcile, i)
		}
		a, b := rc.uses[idx], rc.uses[ofIdx]
		if a.responseID == "" || a.responseID != b.responseID || a.ids[pos] == "" || a.ids[pos] != b.ids[ofPos] ||
			!b.readable[ofPos] || (a.readable[pos] && !a.retrieve) {
			return 0, fmt.Errorf("%w: repeated entry %d is not a retrieve's use of the response and use it names", ErrReconcile, i)
		}
		seen[k] = true
	}
	return n, nil
}
