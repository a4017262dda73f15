package signer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/verify"
)

// Record types this package writes beyond those verify names.
const (
	TypeCallRefused      = "call.refused"      // run "_log": a call on a closed run
	TypeApprovalResolved = "approval.resolved" // an operator approved or denied
	TypeApprovalRefused  = "approval.refused"  // a consume or request was refused
)

// Close reasons (run.closing body "reason").
const (
	ReasonClosed      = "closed"
	ReasonIdleTimeout = "idle_timeout"
)

// RunInfo answers register and status.
type RunInfo struct {
	Run              string    `json:"run"`
	Tenant           string    `json:"tenant"`
	Agent            string    `json:"agent"`
	Session          string    `json:"session"`
	Closed           bool      `json:"closed"`
	ClosedReason     string    `json:"closed_reason,omitempty"`
	Records          int64     `json:"records"`
	LastActivity     time.Time `json:"last_activity,omitzero"`
	PendingApprovals int       `json:"pending_approvals"`
}

// identityBody is the run.registered body's "identity": who the exchange
// attested (apikey.Identity) and whether an outside authority attested it
// (true for the kubernetes method: TokenReview and the owner chain).
func identityBody(id apikey.Identity) map[string]any {
	return map[string]any{
		"method":          id.Method,
		"service_account": id.ServiceAccount,
		"tenant":          id.Tenant,
		"agent":           id.Agent,
		"session":         id.Session,
		"pod_uid":         id.PodUID,
		"sandbox":         id.SandboxName,
		"sandbox_uid":     id.SandboxUID,
		"claim_uid":       id.ClaimUID,
		"attested":        id.Method == "kubernetes",
	}
}

// Register starts a run for caller and records run.registered with the
// attested identity. It refuses with ErrTooManyRuns when caller's agent
// already holds Options.MaxOpenRuns open runs: each is a record in the
// log every tenant shares and an entry in memory until it closes.
func (s *Signer) Register(ctx context.Context, caller apikey.Identity) (RunInfo, error) {
	if caller.Tenant == "" || caller.Agent == "" {
		return RunInfo{}, fmt.Errorf("%w: caller has no tenant or agent", ErrInvalid)
	}
	id := randomHex(16)
	idb := identityBody(caller)
	idJSON, _ := json.Marshal(idb)
	var info RunInfo
	err := s.submit(ctx, func(t *txn) error {
		if n := s.openRuns(caller.Tenant, caller.Agent); n >= s.opts.MaxOpenRuns {
			return fmt.Errorf("%w (%d; close one, or wait for one to idle out)", ErrTooManyRuns, n)
		}
		row := RunRow{ID: id, Tenant: caller.Tenant, Agent: caller.Agent, Session: caller.Session, Identity: idJSON, CreatedAt: t.now}
		rs := &runState{row: row, calls: map[string]*callState{}, approvals: map[string]*approval{}}
		if _, err := t.append(rs, verify.TypeRunRegistered, map[string]any{"identity": idb, "isolation": "remote"}); err != nil {
			return err
		}
		rs.lastActivity = t.now
		t.b.NewRuns = append(t.b.NewRuns, row)
		s.runs[id] = rs
		info = s.info(rs)
		return nil
	})
	if err != nil {
		return RunInfo{}, fmt.Errorf("register run: %w", err)
	}
	return info, nil
}

// openRuns counts the open runs of tenant/agent (s.runs holds open runs
// only: a close deletes its run once committed). Run by the committer.
func (s *Signer) openRuns(tenant, agent string) int {
	n := 0
	for _, rs := range s.runs {
		if !rs.closed && rs.row.Tenant == tenant && rs.row.Agent == agent {
			n++
		}
	}
	return n
}

func (s *Signer) info(rs *runState) RunInfo {
	n := 0
	for _, a := range rs.approvals {
		if a.row.State == ApprovalPending {
			n++
		}
	}
	return RunInfo{
		Run: rs.row.ID, Tenant: rs.row.Tenant, Agent: rs.row.Agent, Session: rs.row.Session,
		Closed: rs.closed || rs.row.ClosedReason != "", ClosedReason: rs.row.ClosedReason,
		Records: rs.seq, LastActivity: rs.lastActivity, PendingApprovals: n,
	}
}

// owned checks that run exists and belongs to caller, without recording.
func (s *Signer) owned(ctx context.Context, caller apikey.Identity, run string) error {
	s.mu.Lock()
	rs, ok := s.runs[run]
	var row RunRow
	if ok {
		row = rs.row
	}
	s.mu.Unlock()
	if !ok {
		var err error
		if row, err = s.store.Run(ctx, run); err != nil {
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("run %s: %w", run, ErrNotFound)
			}
			return err
		}
	}
	if row.Tenant != caller.Tenant || row.Agent != caller.Agent {
		return fmt.Errorf("run %s: %w", run, ErrForbidden)
	}
	return nil
}

// openRun returns caller's open run, run on the committer. A call on a
// closed run is recorded as call.refused in "_log" and refused with
// ErrRunClosed. caller nil means an operator (no ownership check).
func (t *txn) openRun(caller *apikey.Identity, run, operation string) (*runState, error) {
	s := t.s
	rs, ok := s.runs[run]
	var row RunRow
	if ok {
		row = rs.row
	} else {
		var err error
		if row, err = s.store.Run(context.Background(), run); err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("run %s: %w", run, ErrNotFound)
			}
			return nil, err
		}
	}
	if caller != nil && (row.Tenant != caller.Tenant || row.Agent != caller.Agent) {
		return nil, fmt.Errorf("run %s: %w", run, ErrForbidden)
	}
	if ok && !rs.closed {
		return rs, nil
	}
	body := map[string]any{"run": run, "operation": operation, "reason": "run_closed"}
	if caller != nil {
		body["tenant"], body["agent"], body["session"] = caller.Tenant, caller.Agent, caller.Session
	} else {
		body["operator"] = true
	}
	if _, err := t.append(s.logRun, TypeCallRefused, body); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("run %s: %w", run, ErrRunClosed)
}

// DecideRequest is the body of POST …/decide.
type DecideRequest struct {
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
}

// DecideResponse answers POST …/decide.
type DecideResponse struct {
	CallID         string            `json:"call_id"`
	Effect         policy.Effect     `json:"effect"`
	RuleIDs        []string          `json:"rule_ids"`
	PolicyHash     string            `json:"policy_hash"`
	Errors         map[string]string `json:"errors,omitempty"`
	ArgsCommitment string            `json:"args_commitment"`
	Index          int64             `json:"index"`
	RunSeq         int64             `json:"run_seq"`
}

func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// canonicalArgs returns the JCS form of args ({} when absent).
func canonicalArgs(args json.RawMessage) ([]byte, error) {
	if len(args) == 0 {
		return []byte("{}"), nil
	}
	c, err := verify.CanonicalizeJSON(args)
	if err != nil {
		return nil, fmt.Errorf("%w: args: %w", ErrInvalid, err)
	}
	return c, nil
}

// Decide decides a call by the tenant's policy and records call.decided
// with the args committed (salted; the salt kept for a later reveal).
func (s *Signer) Decide(ctx context.Context, caller apikey.Identity, run string, req DecideRequest) (DecideResponse, error) {
	if !validName(req.CallID, 128) || !validName(req.Tool, 256) {
		return DecideResponse{}, fmt.Errorf("%w: call_id and tool are required (printable, at most 128 and 256 bytes)", ErrInvalid)
	}
	if err := s.owned(ctx, caller, run); err != nil {
		return DecideResponse{}, err
	}
	canon, err := canonicalArgs(req.Args)
	if err != nil {
		return DecideResponse{}, err
	}
	pol, polHash, err := s.tenantPolicy(ctx, caller.Tenant)
	var invalid *invalidPolicyError
	if err != nil && !errors.As(err, &invalid) {
		return DecideResponse{}, err
	}
	d, _ := s.engine.Decide(ctx, pol, policy.Call{Tool: req.Tool, Args: canon, Tenant: caller.Tenant, Agent: caller.Agent, Session: caller.Session})
	if invalid != nil {
		d = denyInvalidPolicy(d)
	}
	salt := newSalt()
	commitment, err := verify.CommitArgs(salt, canon)
	if err != nil {
		return DecideResponse{}, err
	}
	resp := DecideResponse{CallID: req.CallID, Effect: d.Effect, RuleIDs: d.RuleIDs, PolicyHash: polHash, Errors: d.Errors, ArgsCommitment: commitment}
	rules := make([]any, len(d.RuleIDs))
	for i, r := range d.RuleIDs {
		rules[i] = r
	}
	body := map[string]any{
		"call_id": req.CallID, "tool": req.Tool, "args_commitment": commitment,
		"effect": string(d.Effect), "rule_ids": rules, "policy_hash": polHash,
	}
	if d.Default {
		body["default"] = true
	}
	err = s.submit(ctx, func(t *txn) error {
		rs, err := t.openRun(&caller, run, "decide")
		if err != nil {
			return err
		}
		if _, dup := rs.calls[req.CallID]; dup {
			return fmt.Errorf("call %s: %w", req.CallID, ErrDuplicateCall)
		}
		l, err := t.append(rs, verify.TypeCallDecided, body)
		if err != nil {
			return err
		}
		row := CallRow{Run: run, CallID: req.CallID, Tool: req.Tool, Effect: string(d.Effect), Index: l.Index, Commitment: commitment}
		rs.calls[req.CallID] = &callState{row: row, salt: salt}
		rs.lastActivity = t.now
		t.b.Calls = append(t.b.Calls, row)
		t.b.Salts = append(t.b.Salts, Salt{Index: l.Index, Salt: salt})
		d := decidedDigest(run, l.Index, req.Tool, canon)
		t.b.Digests = append(t.b.Digests, d)
		rs.recon.decided = append(rs.recon.decided, d)
		resp.Index, resp.RunSeq = l.Index, l.RunSeq
		return nil
	})
	if err != nil {
		return DecideResponse{}, fmt.Errorf("decide: %w", err)
	}
	return resp, nil
}

// Appended answers the calls that only append a record.
type Appended struct {
	Index  int64 `json:"index"`
	RunSeq int64 `json:"run_seq"`
}

// CompleteRequest is the body of POST …/complete. Outcome is a short word
// ("ok", "error", …), not the call's output. Result, if set, is the
// call's output as JSON: only a salted commitment to it is recorded (see
// [resultCommitment]).
type CompleteRequest struct {
	CallID  string          `json:"call_id"`
	Outcome string          `json:"outcome"`
	Result  json.RawMessage `json:"result,omitempty"`
}

// Complete records call.completed for a decided call.
func (s *Signer) Complete(ctx context.Context, caller apikey.Identity, run string, req CompleteRequest) (Appended, error) {
	if !validName(req.CallID, 128) || !validName(req.Outcome, 64) {
		return Appended{}, fmt.Errorf("%w: call_id and outcome are required (printable, at most 128 and 64 bytes)", ErrInvalid)
	}
	body := map[string]any{"call_id": req.CallID, "outcome": req.Outcome}
	salt, err := resultCommitment(req.Result, body)
	if err != nil {
		return Appended{}, err
	}
	var out Appended
	err = s.submit(ctx, func(t *txn) error {
		rs, err := t.openRun(&caller, run, "complete")
		if err != nil {
			return err
		}
		if _, ok := rs.calls[req.CallID]; !ok {
			return fmt.Errorf("call %s: %w", req.CallID, ErrNotFound)
		}
		l, err := t.append(rs, verify.TypeCallCompleted, body)
		if err != nil {
			return err
		}
		if salt != nil {
			t.b.Salts = append(t.b.Salts, Salt{Index: l.Index, Salt: salt})
		}
		rs.lastActivity = t.now
		out = Appended{l.Index, l.RunSeq}
		return nil
	})
	if err != nil {
		return Appended{}, fmt.Errorf("complete: %w", err)
	}
	return out, nil
}

// ModelEvent is the body of POST …/model-events: metadata about one model
// call, never its prompt or output.
type ModelEvent struct {
	Event        string `json:"event"` // e.g. "request", "response"
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	StopReason   string `json:"stop_reason,omitempty"`
	InputTokens  int64  `json:"input_tokens,omitempty"`
	OutputTokens int64  `json:"output_tokens,omitempty"`
}

// RecordModelEvent records model.event.
func (s *Signer) RecordModelEvent(ctx context.Context, caller apikey.Identity, run string, ev ModelEvent) (Appended, error) {
	if !validName(ev.Event, 64) || len(ev.Provider) > 64 || len(ev.Model) > 256 || len(ev.RequestID) > 256 || len(ev.StopReason) > 64 ||
		ev.InputTokens < 0 || ev.OutputTokens < 0 || ev.InputTokens > 1<<53-1 || ev.OutputTokens > 1<<53-1 {
		return Appended{}, fmt.Errorf("%w: model event needs event (at most 64 bytes); fields within limits", ErrInvalid)
	}
	body := map[string]any{"event": ev.Event}
	for k, v := range map[string]string{"provider": ev.Provider, "model": ev.Model, "request_id": ev.RequestID, "stop_reason": ev.StopReason} {
		if v != "" {
			body[k] = v
		}
	}
	if ev.InputTokens > 0 {
		body["input_tokens"] = ev.InputTokens
	}
	if ev.OutputTokens > 0 {
		body["output_tokens"] = ev.OutputTokens
	}
	var out Appended
	err := s.submit(ctx, func(t *txn) error {
		rs, err := t.openRun(&caller, run, "model_event")
		if err != nil {
			return err
		}
		l, err := t.append(rs, verify.TypeModelEvent, body)
		if err != nil {
			return err
		}
		rs.lastActivity = t.now
		out = Appended{l.Index, l.RunSeq}
		return nil
	})
	if err != nil {
		return Appended{}, fmt.Errorf("model event: %w", err)
	}
	return out, nil
}

// closeRun appends run.closing and marks rs closed; on the committer.
func (t *txn) closeRun(rs *runState, reason string) (Leaf, error) {
	if err := t.reconcile(rs); err != nil {
		return Leaf{}, err
	}
	l, err := t.append(rs, verify.TypeRunClosing, map[string]any{"reason": reason})
	if err != nil {
		return l, err
	}
	rs.closed = true
	rs.row.ClosedReason = reason
	t.b.ClosedRuns = append(t.b.ClosedRuns, RunClose{ID: rs.row.ID, Reason: reason})
	for _, a := range rs.approvals {
		a.notify()
	}
	id := rs.row.ID
	t.after = append(t.after, func() { delete(t.s.runs, id) })
	return l, nil
}

// CloseRun records run.closing with reason "closed" and signs a
// checkpoint that covers it.
func (s *Signer) CloseRun(ctx context.Context, caller apikey.Identity, run string) (Appended, error) {
	// End the run's gateway tokens first (only for the run's own agent),
	// then record what the gateways observed: the reconciliation must see
	// every model call made before the close.
	if err := s.owned(ctx, caller, run); err != nil {
		return Appended{}, fmt.Errorf("close run: %w", err)
	}
	if f := s.opts.RevokeRunTokens; f != nil {
		if err := f(ctx, caller.Tenant, caller.Agent, run); err != nil {
			return Appended{}, fmt.Errorf("close run: revoke its gateway tokens: %w", err)
		}
	}
	s.flushLocalInbox(ctx)
	if _, err := s.DrainInbox(ctx); err != nil {
		return Appended{}, fmt.Errorf("close run: %w", err)
	}
	var out Appended
	err := s.submit(ctx, func(t *txn) error {
		rs, err := t.openRun(&caller, run, "close")
		if err != nil {
			return err
		}
		l, err := t.closeRun(rs, ReasonClosed)
		out = Appended{l.Index, l.RunSeq}
		return err
	})
	if err != nil {
		return Appended{}, fmt.Errorf("close run: %w", err)
	}
	if _, err := s.Checkpoint(ctx); err != nil && !errors.Is(err, ErrLogRollback) {
		s.log.WarnContext(ctx, "checkpoint at run close failed", "run", run, "err", err)
	}
	return out, nil
}

// Status reports a run's state.
func (s *Signer) Status(ctx context.Context, caller apikey.Identity, run string) (RunInfo, error) {
	if err := s.owned(ctx, caller, run); err != nil {
		return RunInfo{}, err
	}
	s.mu.Lock()
	rs, ok := s.runs[run]
	if ok {
		info := s.info(rs)
		s.mu.Unlock()
		return info, nil
	}
	s.mu.Unlock()
	row, err := s.store.Run(ctx, run)
	if err != nil {
		return RunInfo{}, err
	}
	info := RunInfo{Run: row.ID, Tenant: row.Tenant, Agent: row.Agent, Session: row.Session, Closed: row.ClosedReason != "", ClosedReason: row.ClosedReason}
	if l, err := s.store.LastLeaf(ctx, run); err == nil {
		info.Records = l.RunSeq + 1
		if rec, err := verify.ParseRecord(l.Record); err == nil {
			info.LastActivity = rec.Time
		}
	}
	return info, nil
}

// idleSince is when rs's idle clock started, or ok false while an approval
// is pending (the clock is paused). Holds s.mu.
func idleSince(rs *runState, now time.Time) (time.Time, bool) {
	last := rs.lastActivity
	for _, a := range rs.approvals {
		switch {
		case a.row.State == ApprovalPending && now.Before(a.row.ExpiresAt):
			return time.Time{}, false
		case a.row.State == ApprovalPending:
			if a.row.ExpiresAt.After(last) {
				last = a.row.ExpiresAt
			}
		case a.row.ResolvedAt.After(last):
			last = a.row.ResolvedAt
		}
	}
	return last, true
}

// CloseIdle closes every run idle for IdleTimeout with run.closing reason
// idle_timeout, then signs a checkpoint. It returns how many it closed.
// The idle closer calls it every IdleCheckInterval.
func (s *Signer) CloseIdle(ctx context.Context) (int, error) {
	now := s.opts.Now()
	var ids []string
	var owners []RunRow
	s.mu.Lock()
	for id, rs := range s.runs {
		if since, ok := idleSince(rs, now); ok && !rs.closed && now.Sub(since) >= s.opts.IdleTimeout {
			ids = append(ids, id)
			owners = append(owners, rs.row)
		}
	}
	s.mu.Unlock()
	if f := s.opts.RevokeRunTokens; f != nil {
		kept := ids[:0]
		for i, id := range ids {
			if err := f(ctx, owners[i].Tenant, owners[i].Agent, id); err != nil {
				s.log.WarnContext(ctx, "idle run not closed: its gateway tokens could not be revoked; trying again later", "run", id, "err", err)
				continue
			}
			kept = append(kept, id)
		}
		ids = kept
	}
	if len(ids) > 0 {
		s.flushLocalInbox(ctx)
		if _, err := s.DrainInbox(ctx); err != nil {
			return 0, fmt.Errorf("idle close: %w", err)
		}
	}
	closed := 0
	for _, id := range ids {
		err := s.submit(ctx, func(t *txn) error {
			rs, ok := s.runs[id]
			if !ok || rs.closed {
				return nil
			}
			if since, ok := idleSince(rs, t.now); !ok || t.now.Sub(since) < s.opts.IdleTimeout {
				return nil // a call came in meanwhile
			}
			if _, err := t.closeRun(rs, ReasonIdleTimeout); err != nil {
				return err
			}
			closed++
			return nil
		})
		if err != nil {
			return closed, fmt.Errorf("idle close %s: %w", id, err)
		}
	}
	if closed > 0 {
		s.log.InfoContext(ctx, "closed idle runs", "runs", closed)
		if _, err := s.Checkpoint(ctx); err != nil && !errors.Is(err, ErrLogRollback) {
			return closed, err
		}
	}
	return closed, nil
}

// RevealSalt returns the args salt of the record at index, to open that
// record's args_commitment (verify.VerifyArgsReveal). Operators only.
func (s *Signer) RevealSalt(ctx context.Context, index int64) ([]byte, error) {
	salt, err := s.store.Salt(ctx, index)
	if err != nil {
		return nil, fmt.Errorf("reveal salt %d: %w", index, err)
	}
	return salt, nil
}
