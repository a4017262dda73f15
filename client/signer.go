package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Run is a signer run as custody reports it.
type Run struct {
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

// Decision is the signer's decision on one tool call. Effect is "allow",
// "deny" or "ask"; RuleIDs lists every matching rule (built-in rules
// first); Index and RunSeq locate the signed call.decided record.
type Decision struct {
	CallID         string            `json:"call_id"`
	Effect         string            `json:"effect"`
	RuleIDs        []string          `json:"rule_ids"`
	PolicyHash     string            `json:"policy_hash"`
	Errors         map[string]string `json:"errors,omitempty"`
	ArgsCommitment string            `json:"args_commitment"`
	Index          int64             `json:"index"`
	RunSeq         int64             `json:"run_seq"`
}

// Appended locates a record the signer appended.
type Appended struct {
	Index  int64 `json:"index"`
	RunSeq int64 `json:"run_seq"`
}

// ModelEvent is metadata about one model call (never its prompt or
// output).
type ModelEvent struct {
	Event        string `json:"event"`
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	StopReason   string `json:"stop_reason,omitempty"`
	InputTokens  int64  `json:"input_tokens,omitempty"`
	OutputTokens int64  `json:"output_tokens,omitempty"`
}

// Approval is an approval request; State is pending, approved, denied,
// consumed or expired.
type Approval struct {
	ID             string    `json:"approval_id"`
	Run            string    `json:"run"`
	CallID         string    `json:"call_id"`
	Tool           string    `json:"tool"`
	State          string    `json:"state"`
	ArgsCommitment string    `json:"args_commitment"`
	ExpiresAt      time.Time `json:"expires_at"`
	Index          int64     `json:"index,omitempty"`
}

// RegisterRun starts a run for this agent.
func (c *Client) RegisterRun(ctx context.Context) (Run, error) {
	var out Run
	return out, c.signer(ctx, http.MethodPost, "", nil, &out)
}

// Decide asks whether tool may run with args (a JSON object; only a
// salted commitment to it is logged). callID is unique within the run.
func (c *Client) Decide(ctx context.Context, run, callID, tool string, args json.RawMessage) (Decision, error) {
	var out Decision
	body := map[string]any{"call_id": callID, "tool": tool, "args": args}
	return out, c.signer(ctx, http.MethodPost, "/"+url.PathEscape(run)+"/decide", body, &out)
}

// Complete records the outcome ("ok", "error", …; not the output) of a
// decided call.
func (c *Client) Complete(ctx context.Context, run, callID, outcome string) (Appended, error) {
	var out Appended
	body := map[string]any{"call_id": callID, "outcome": outcome}
	return out, c.signer(ctx, http.MethodPost, "/"+url.PathEscape(run)+"/complete", body, &out)
}

// RecordModelEvent records metadata about one model call.
func (c *Client) RecordModelEvent(ctx context.Context, run string, ev ModelEvent) (Appended, error) {
	var out Appended
	return out, c.signer(ctx, http.MethodPost, "/"+url.PathEscape(run)+"/model-events", ev, &out)
}

// RequestApproval asks an operator to approve a call decided "ask",
// bound to exactly tool and args.
func (c *Client) RequestApproval(ctx context.Context, run, callID, tool string, args json.RawMessage) (Approval, error) {
	var out Approval
	body := map[string]any{"call_id": callID, "tool": tool, "args": args}
	return out, c.signer(ctx, http.MethodPost, "/"+url.PathEscape(run)+"/approvals", body, &out)
}

// WaitApproval reads an approval, waiting up to wait (at most 60 s) while
// it is pending; the request may take Config.Timeout longer than wait.
func (c *Client) WaitApproval(ctx context.Context, run, id string, wait time.Duration) (Approval, error) {
	var out Approval
	path := "/" + url.PathEscape(run) + "/approvals/" + url.PathEscape(id)
	if wait > 0 {
		path += "?wait=" + strconv.Itoa(int(wait/time.Second))
		ctx = context.WithValue(ctx, longerRequest{}, wait)
	}
	return out, c.signer(ctx, http.MethodGet, path, nil, &out)
}

// ConsumeApproval uses an approved approval once, with exactly its args.
func (c *Client) ConsumeApproval(ctx context.Context, run, id string, args json.RawMessage) (Approval, error) {
	var out Approval
	path := "/" + url.PathEscape(run) + "/approvals/" + url.PathEscape(id) + "/consume"
	return out, c.signer(ctx, http.MethodPost, path, map[string]any{"args": args}, &out)
}

// CloseRun closes a run; later calls in it are refused and recorded.
func (c *Client) CloseRun(ctx context.Context, run string) (Appended, error) {
	var out Appended
	return out, c.signer(ctx, http.MethodPost, "/"+url.PathEscape(run)+"/close", nil, &out)
}

// RunStatus reads a run's state.
func (c *Client) RunStatus(ctx context.Context, run string) (Run, error) {
	var out Run
	return out, c.signer(ctx, http.MethodGet, "/"+url.PathEscape(run)+"/status", nil, &out)
}

// signer sends a signer call (path relative to /v1/signer/runs). While
// custody answers 503 signer_standby, which it does before recording
// anything, the call is retried after each Retry-After for up to
// Config.StandbyWait.
func (c *Client) signer(ctx context.Context, method, path string, body, out any) error {
	deadline := c.cfg.Now().Add(c.cfg.StandbyWait)
	for {
		err := c.authed(ctx, method, func(Key) string { return "/v1/signer/runs" + path }, body, nil, out)
		var ce *Error
		if !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable || ce.Code != "signer_standby" {
			return err
		}
		pause := max(ce.RetryAfter, 100*time.Millisecond)
		if c.cfg.StandbyWait < 0 || c.cfg.Now().Add(pause).After(deadline) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
