package signer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/verify"
)

// ApprovalRequest is the body of POST …/approvals: the call decided ask,
// with the exact tool and args it was decided with.
type ApprovalRequest struct {
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
}

// ApprovalInfo describes an approval.
type ApprovalInfo struct {
	ID             string    `json:"approval_id"`
	Run            string    `json:"run"`
	CallID         string    `json:"call_id"`
	Tool           string    `json:"tool"`
	State          string    `json:"state"` // pending | approved | denied | consumed | expired
	ArgsCommitment string    `json:"args_commitment"`
	ExpiresAt      time.Time `json:"expires_at"`
	Index          int64     `json:"index,omitempty"` // of the record this call appended
}

func (a *approval) info(now time.Time) ApprovalInfo {
	st := a.row.State
	if (st == ApprovalPending || st == ApprovalApproved) && !now.Before(a.row.ExpiresAt) {
		st = "expired"
	}
	return ApprovalInfo{ID: a.row.ID, Run: a.row.Run, CallID: a.row.CallID, Tool: a.row.Tool, State: st,
		ArgsCommitment: a.row.Commitment, ExpiresAt: a.row.ExpiresAt}
}

// notify wakes waiters; holds s.mu.
func (a *approval) notify() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// RequestApproval asks an operator to approve a call decided ask. The
// approval is bound to a fresh commitment of the exact args and expires
// after ApprovalTTL. While it is pending the run's idle clock is paused.
func (s *Signer) RequestApproval(ctx context.Context, caller apikey.Identity, run string, req ApprovalRequest) (ApprovalInfo, error) {
	if !validName(req.CallID, 128) || !validName(req.Tool, 256) {
		return ApprovalInfo{}, fmt.Errorf("%w: call_id and tool are required", ErrInvalid)
	}
	canon, err := canonicalArgs(req.Args)
	if err != nil {
		return ApprovalInfo{}, err
	}
	salt := newSalt()
	commitment, _ := verify.CommitArgs(salt, canon)
	id := randomHex(16)
	var out ApprovalInfo
	err = s.submit(ctx, func(t *txn) error {
		rs, err := t.openRun(&caller, run, "approval_request")
		if err != nil {
			return err
		}
		rs.lastActivity = t.now
		c := rs.calls[req.CallID]
		if c == nil || c.row.Effect != "ask" || c.row.Tool != req.Tool {
			return t.refuseApproval(rs, "", req.CallID, ErrApprovalNotAsk, "")
		}
		if got, _ := verify.CommitArgs(c.salt, canon); got != c.row.Commitment {
			return t.refuseApproval(rs, "", req.CallID, ErrApprovalNotAsk, "")
		}
		exp := t.now.Add(s.opts.ApprovalTTL)
		l, err := t.append(rs, verify.TypeApprovalRequested, map[string]any{
			"approval_id": id, "call_id": req.CallID, "tool": req.Tool, "args_commitment": commitment,
			"expires_at": exp.UTC().Format(verify.TimeLayout),
		})
		if err != nil {
			return err
		}
		a := &approval{row: ApprovalRow{ID: id, Run: run, CallID: req.CallID, Tool: req.Tool, Index: l.Index,
			Commitment: commitment, CreatedAt: t.now, ExpiresAt: exp, State: ApprovalPending}, salt: salt, changed: make(chan struct{})}
		rs.approvals[id] = a
		t.b.Approvals = append(t.b.Approvals, a.row)
		t.b.Salts = append(t.b.Salts, Salt{Index: l.Index, Salt: salt})
		out = a.info(t.now)
		out.Index = l.Index
		return nil
	})
	if err != nil {
		return ApprovalInfo{}, fmt.Errorf("request approval: %w", err)
	}
	return out, nil
}

// refuseApproval records approval.refused with the reason code and
// returns reason. commitment is of the args presented, if any.
func (t *txn) refuseApproval(rs *runState, id, callID string, reason error, commitment string) error {
	body := map[string]any{"call_id": callID, "reason": ErrorCode(reason)}
	if id != "" {
		body["approval_id"] = id
	}
	if commitment != "" {
		body["args_commitment"] = commitment
	}
	if _, err := t.append(rs, TypeApprovalRefused, body); err != nil {
		return err
	}
	return reason
}

// findApproval returns run's approval id; holds s.mu.
func (s *Signer) findApproval(ctx context.Context, run, id string) (*approval, error) {
	if rs, ok := s.runs[run]; ok {
		if a, ok := rs.approvals[id]; ok {
			return a, nil
		}
		return nil, fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	row, err := s.store.Approval(ctx, id)
	if err != nil || row.Run != run {
		return nil, fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	return &approval{row: row}, nil
}

// MaxWait bounds the long poll of WaitApproval.
const MaxWait = 60 * time.Second

// WaitApproval returns the approval once it is no longer pending, or when
// wait (at most MaxWait) or the approval's expiry passes, or ctx ends.
func (s *Signer) WaitApproval(ctx context.Context, caller apikey.Identity, run, id string, wait time.Duration) (ApprovalInfo, error) {
	if err := s.owned(ctx, caller, run); err != nil {
		return ApprovalInfo{}, err
	}
	wait = min(max(wait, 0), MaxWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		a, err := s.findApproval(ctx, run, id)
		if err != nil {
			s.mu.Unlock()
			return ApprovalInfo{}, err
		}
		now := s.opts.Now()
		info := a.info(now)
		ch := a.changed
		s.mu.Unlock()
		if info.State != ApprovalPending || ch == nil {
			return info, nil
		}
		expiry := time.NewTimer(max(info.ExpiresAt.Sub(now), time.Millisecond))
		select {
		case <-ch:
			expiry.Stop()
		case <-expiry.C:
			return s.approvalNow(ctx, run, id)
		case <-deadline.C:
			expiry.Stop()
			return info, nil
		case <-ctx.Done():
			expiry.Stop()
			return info, nil
		}
	}
}

func (s *Signer) approvalNow(ctx context.Context, run, id string) (ApprovalInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.findApproval(ctx, run, id)
	if err != nil {
		return ApprovalInfo{}, err
	}
	return a.info(s.opts.Now()), nil
}

// ResolveApproval is the operator's approve (true) or deny (false) of a
// pending approval; it records approval.resolved in the run.
func (s *Signer) ResolveApproval(ctx context.Context, id string, approve bool) (ApprovalInfo, error) {
	row, err := s.store.Approval(ctx, id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			// Maybe requested in the batch being committed: look in memory.
			s.mu.Lock()
			var found bool
			for _, rs := range s.runs {
				if a, ok := rs.approvals[id]; ok {
					row, found = a.row, true
				}
			}
			s.mu.Unlock()
			if !found {
				return ApprovalInfo{}, fmt.Errorf("approval %s: %w", id, ErrNotFound)
			}
		} else {
			return ApprovalInfo{}, err
		}
	}
	decision := "deny"
	if approve {
		decision = "approve"
	}
	var out ApprovalInfo
	err = s.submit(ctx, func(t *txn) error {
		rs, err := t.openRun(nil, row.Run, "approval_"+decision)
		if err != nil {
			return err
		}
		a := rs.approvals[id]
		if a == nil {
			return fmt.Errorf("approval %s: %w", id, ErrNotFound)
		}
		switch {
		case a.row.State == ApprovalConsumed:
			return ErrApprovalConsumed
		case a.row.State == ApprovalDenied:
			return ErrApprovalDenied
		case !t.now.Before(a.row.ExpiresAt):
			return ErrApprovalExpired
		case a.row.State == ApprovalApproved:
			if approve {
				out = a.info(t.now)
				return nil
			}
			return fmt.Errorf("%w: already approved", ErrApproval)
		}
		l, err := t.append(rs, TypeApprovalResolved, map[string]any{"approval_id": id, "call_id": a.row.CallID, "decision": decision})
		if err != nil {
			return err
		}
		state := ApprovalDenied
		if approve {
			state = ApprovalApproved
		}
		out = t.resolve(a, state, l)
		return nil
	})
	if err != nil {
		return ApprovalInfo{}, fmt.Errorf("%s approval: %w", decision, err)
	}
	return out, nil
}

// ConsumeRequest is the body of POST …/approvals/{id}/consume.
type ConsumeRequest struct {
	Args json.RawMessage `json:"args"`
}

// ConsumeApproval uses an approved approval once, with exactly the args
// it is bound to. A refusal (other args, twice, late, denied, pending) is
// recorded as approval.refused in the run.
func (s *Signer) ConsumeApproval(ctx context.Context, caller apikey.Identity, run, id string, req ConsumeRequest) (ApprovalInfo, error) {
	canon, err := canonicalArgs(req.Args)
	if err != nil {
		return ApprovalInfo{}, err
	}
	salt := newSalt()
	presented, _ := verify.CommitArgs(salt, canon)
	var out ApprovalInfo
	err = s.submit(ctx, func(t *txn) error {
		rs, err := t.openRun(&caller, run, "approval_consume")
		if err != nil {
			return err
		}
		rs.lastActivity = t.now
		a := rs.approvals[id]
		if a == nil {
			return fmt.Errorf("approval %s: %w", id, ErrNotFound)
		}
		refuse := func(reason error) error {
			l := t.s.size
			err := t.refuseApproval(rs, id, a.row.CallID, reason, presented)
			if t.s.size > l {
				t.b.Salts = append(t.b.Salts, Salt{Index: l, Salt: salt})
			}
			return err
		}
		switch {
		case a.row.State == ApprovalConsumed:
			return refuse(ErrApprovalConsumed)
		case a.row.State == ApprovalDenied:
			return refuse(ErrApprovalDenied)
		case !t.now.Before(a.row.ExpiresAt):
			return refuse(ErrApprovalExpired)
		case a.row.State == ApprovalPending:
			return refuse(ErrApprovalPending)
		}
		if got, _ := verify.CommitArgs(a.salt, canon); got != a.row.Commitment {
			return refuse(ErrArgsMismatch)
		}
		l, err := t.append(rs, verify.TypeApprovalConsumed, map[string]any{
			"approval_id": id, "call_id": a.row.CallID, "args_commitment": presented,
		})
		if err != nil {
			return err
		}
		t.b.Salts = append(t.b.Salts, Salt{Index: l.Index, Salt: salt})
		out = t.resolve(a, ApprovalConsumed, l)
		return nil
	})
	if err != nil {
		return ApprovalInfo{}, fmt.Errorf("consume approval: %w", err)
	}
	return out, nil
}

// resolve moves a to state (approved, denied or consumed) as of the
// record l, stores the row with the batch, wakes its waiters once the
// batch commits, and returns the approval as the caller sees it.
func (t *txn) resolve(a *approval, state string, l Leaf) ApprovalInfo {
	a.row.State = state
	a.row.ResolvedAt = t.now
	t.b.Approvals = append(t.b.Approvals, a.row)
	t.after = append(t.after, a.notify)
	out := a.info(t.now)
	out.Index = l.Index
	return out
}
