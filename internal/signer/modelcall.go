package signer

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentcustody/custody/verify"
)

// Model-call record types. model.call is in its run; model.call.refused
// is in "_log" (the run is unknown, closed, or another agent's).
const (
	TypeModelCallRefused = "model.call.refused"
)

// Bounds of a ModelCall the signer records; an entry over them is
// recorded as model.call.refused reason "invalid" (without its tool uses).
const (
	MaxModelCallUses = 256     // tool uses listed per model call
	maxInboxEntry    = 8 << 20 // bytes of one inbox entry's JSON
)

// ModelCall is what a gateway observed of one model call made with a
// gateway token minted for a run: the inbox entry it hands the signer
// ([InboxWriter]) and the source of a model.call record. Run, Tenant
// and Agent are the token's run_id, tenant and agent claims; the run must
// be the agent's own. Bodies never reach the signer: only their SHA-256.
type ModelCall struct {
	Run       string    `json:"run"`
	Tenant    string    `json:"tenant"`
	Agent     string    `json:"agent"`
	TokenID   string    `json:"token_id"`         // the gateway token's jti
	Provider  string    `json:"provider"`         // gateway provider name, e.g. "anthropic"
	Model     string    `json:"model,omitempty"`  // as the response reports it, else as requested
	PathClass string    `json:"path_class"`       // e.g. "messages", "chat"
	Method    string    `json:"method"`           // HTTP method
	Status    int       `json:"status"`           // HTTP status answered to the client
	Outcome   string    `json:"outcome"`          // proxied, revoked, cancelled, upstream_error, refused
	Stream    bool      `json:"stream,omitempty"` // a server-sent event stream
	Started   time.Time `json:"started"`          // request received
	Duration  int64     `json:"duration_ms"`      // until the response ended (or was cut), ms
	FirstByte int64     `json:"first_byte_ms,omitempty"`
	// Usage, when the response carried it.
	InputTokens  *int64 `json:"input_tokens,omitempty"`
	OutputTokens *int64 `json:"output_tokens,omitempty"`
	StopReason   string `json:"stop_reason,omitempty"`
	// RequestSHA256 and ResponseSHA256 are hex SHA-256 of the request
	// body as received and the response body as delivered to the client.
	RequestSHA256  string `json:"request_sha256"`
	ResponseSHA256 string `json:"response_sha256"`
	// ToolUses are the tool uses the model requested, in order;
	// ToolUsesDropped counts those beyond the gateway's bound.
	ToolUses        []ToolUse `json:"tool_uses,omitempty"`
	ToolUsesDropped int       `json:"tool_uses_dropped,omitempty"`
	// ResponseMalformed: the response could not be parsed for tool uses.
	ResponseMalformed bool `json:"response_malformed,omitempty"`
	// ResponseID is the provider's id of the response, for an API that
	// can retrieve a response again (OpenAI Responses: GET
	// /v1/responses/{id}), from the response body; "" if none. A use a
	// retrieve (Method GET) carries again is counted once (see
	// [reconState.repeats]).
	ResponseID string `json:"response_id,omitempty"`
}

// ToolUse is one tool use a model requested. Args is its canonical JSON
// arguments (JCS), nil when they were malformed or over the bound.
type ToolUse struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args,omitempty"`
	Malformed bool            `json:"malformed,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

// check validates a decoded inbox entry.
func (c *ModelCall) check() error {
	switch {
	case !validRunID(c.Run):
		return errors.New("run")
	case !validName(c.Tenant, 256) || !validName(c.Agent, 256):
		return errors.New("tenant or agent")
	case len(c.TokenID) > 128 || !validName(c.Provider, 64) || len(c.Model) > 256 ||
		len(c.PathClass) > 128 || len(c.Method) > 16 || len(c.Outcome) > 32 || len(c.StopReason) > 64:
		return errors.New("field too long")
	case c.Status < 0 || c.Status > 999 || c.Duration < 0 || c.FirstByte < 0:
		return errors.New("status or timing")
	case !isHexDigest(c.RequestSHA256) || !isHexDigest(c.ResponseSHA256):
		return errors.New("body digests")
	case len(c.ToolUses) > MaxModelCallUses || c.ToolUsesDropped < 0:
		return errors.New("tool uses")
	case c.ResponseID != "" && !validName(c.ResponseID, 256):
		return errors.New("response id")
	}
	for _, u := range c.ToolUses {
		if !validName(u.Name, 256) || len(u.ID) > 256 {
			return errors.New("tool use name")
		}
	}
	return nil
}

func validRunID(s string) bool {
	return validName(s, 128) && s[0] != '_'
}

func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// bodyCommitment commits to a body by its SHA-256: verify.CommitArgs over
// the JCS form of the JSON string "sha256:<hex>".
func bodyCommitment(salt []byte, hexDigest string) (string, error) {
	return verify.CommitArgs(salt, []byte(`"sha256:`+hexDigest+`"`))
}

// modelCallBody is the model.call record body for c, with the argument
// digests of its tool uses (for the reconciliation, never recorded).
//
//	{provider, model?, path_class, method, status, outcome, stream?,
//	 started, duration_ms, first_byte_ms?, input_tokens?, output_tokens?,
//	 stop_reason?, token_id, request_commitment, response_commitment,
//	 tool_uses: [{name, id?, args_commitment? | malformed? | truncated?}],
//	 tool_uses_dropped?, response_malformed?, response_id?}
func modelCallBody(c *ModelCall, salt []byte) (map[string]any, [][]byte, error) {
	req, err := bodyCommitment(salt, c.RequestSHA256)
	if err != nil {
		return nil, nil, err
	}
	res, err := bodyCommitment(salt, c.ResponseSHA256)
	if err != nil {
		return nil, nil, err
	}
	body := map[string]any{
		"provider": c.Provider, "path_class": c.PathClass, "method": c.Method,
		"status": int64(c.Status), "outcome": c.Outcome, "token_id": c.TokenID,
		"started": c.Started.UTC().Format(verify.TimeLayout), "duration_ms": c.Duration,
		"request_commitment": req, "response_commitment": res,
	}
	setIf(body, "model", c.Model, c.Model != "")
	setIf(body, "stream", true, c.Stream)
	setIf(body, "first_byte_ms", c.FirstByte, c.FirstByte > 0)
	if c.InputTokens != nil {
		body["input_tokens"] = *c.InputTokens
	}
	if c.OutputTokens != nil {
		body["output_tokens"] = *c.OutputTokens
	}
	setIf(body, "stop_reason", c.StopReason, c.StopReason != "")
	setIf(body, "tool_uses_dropped", int64(c.ToolUsesDropped), c.ToolUsesDropped > 0)
	setIf(body, "response_malformed", true, c.ResponseMalformed)
	setIf(body, "response_id", c.ResponseID, c.ResponseID != "")
	uses := make([]any, len(c.ToolUses))
	digests := make([][]byte, len(c.ToolUses))
	for i, u := range c.ToolUses {
		m := map[string]any{"name": u.Name}
		setIf(m, "id", u.ID, u.ID != "")
		var canon []byte
		if !u.Malformed && !u.Truncated && len(u.Args) > 0 {
			if canon, err = verify.CanonicalizeJSON(u.Args); err != nil {
				u.Malformed = true
			}
		}
		switch {
		case u.Truncated:
			m["truncated"] = true
		case u.Malformed || canon == nil:
			m["malformed"] = true
		default:
			ac, err := verify.CommitArgs(salt, canon)
			if err != nil {
				return nil, nil, err
			}
			m["args_commitment"] = ac
			d := sha256.Sum256(canon)
			digests[i] = d[:]
		}
		uses[i] = m
	}
	body["tool_uses"] = uses
	return body, digests, nil
}

// setIf sets m[k] = v when ok: the optional members of a record body.
func setIf(m map[string]any, k string, v any, ok bool) {
	if ok {
		m[k] = v
	}
}

// inboxBatch is how many inbox entries one drain records at most.
const inboxBatch = 256

// DrainInbox records the model calls waiting in the store's inbox, in
// batches, until it is empty: each as model.call in its run (which must
// be open and belong to the entry's tenant and agent), else as
// model.call.refused in "_log" with the run and the reason (unknown_run,
// run_closed, forbidden, invalid), so that nothing a gateway observed is
// lost. The entries are removed in the commit that records them. Only one
// drain runs at a time. The inbox loop calls it every
// Options.InboxInterval; closing a run calls it first.
func (s *Signer) DrainInbox(ctx context.Context) (int, error) {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	total := 0
	for {
		entries, err := s.store.Inbox(ctx, inboxBatch)
		if err != nil {
			return total, fmt.Errorf("signer: inbox: %w", err)
		}
		if len(entries) == 0 {
			return total, nil
		}
		err = s.submit(ctx, func(t *txn) error {
			for _, e := range entries {
				if err := t.recordModelCall(e); err != nil {
					return err
				}
				t.b.InboxDone = append(t.b.InboxDone, e.ID)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("signer: record model calls: %w", err)
		}
		total += len(entries)
	}
}

// recordModelCall appends one inbox entry's record; on the committer.
func (t *txn) recordModelCall(e InboxEntry) error {
	s := t.s
	var c ModelCall
	reason := ""
	if len(e.Data) > maxInboxEntry {
		reason = "invalid"
	} else if err := json.Unmarshal(e.Data, &c); err != nil {
		reason = "invalid"
	} else if err := c.check(); err != nil {
		reason = "invalid"
	}
	var rs *runState
	if reason == "" {
		var ok bool
		rs, ok = s.runs[c.Run]
		switch {
		case ok && (rs.row.Tenant != c.Tenant || rs.row.Agent != c.Agent):
			reason = "forbidden"
		case ok && !rs.closed:
		default:
			row, err := s.store.Run(context.Background(), c.Run)
			switch {
			case errors.Is(err, ErrNotFound):
				reason = "unknown_run"
			case err != nil:
				return err
			case row.Tenant != c.Tenant || row.Agent != c.Agent:
				reason = "forbidden"
			default:
				reason = "run_closed"
			}
		}
	}
	if reason == "invalid" {
		s.log.Error("model-call inbox entry is invalid; recorded as model.call.refused", "inbox_id", e.ID)
		_, err := t.append(s.logRun, TypeModelCallRefused, map[string]any{"reason": reason, "inbox_id": e.ID})
		return err
	}
	salt := newSalt()
	body, digests, err := modelCallBody(&c, salt)
	if err != nil {
		return err
	}
	if reason != "" {
		body["run"], body["tenant"], body["agent"], body["reason"] = c.Run, c.Tenant, c.Agent, reason
		l, err := t.append(s.logRun, TypeModelCallRefused, body)
		if err != nil {
			return err
		}
		t.b.Salts = append(t.b.Salts, Salt{Index: l.Index, Salt: salt})
		return nil
	}
	l, err := t.append(rs, verify.TypeModelCall, body)
	if err != nil {
		return err
	}
	t.b.Salts = append(t.b.Salts, Salt{Index: l.Index, Salt: salt})
	for i, u := range c.ToolUses {
		d := ArgDigest{Run: c.Run, Index: l.Index, Pos: i, Kind: DigestRequested, Tool: u.Name, Digest: digests[i]}
		t.b.Digests = append(t.b.Digests, d)
		rs.recon.requested = append(rs.recon.requested, d)
		if c.ResponseID == "" || u.ID == "" {
			continue
		}
		k := useKey{retrieve: c.Method == http.MethodGet}
		copy(k.key[:], useKeyOf(c.Provider, c.ResponseID, u.ID, u.Name))
		mark := createMark
		if k.retrieve {
			mark = retrieveMark
		}
		t.b.Digests = append(t.b.Digests, ArgDigest{Run: c.Run, Index: l.Index, Pos: i, Kind: DigestUseKey, Tool: mark, Digest: k.key[:]})
		rs.recon.setKey(usePos{l.Index, i}, k)
	}
	mark := ""
	if c.ResponseMalformed {
		mark = unreadableMark
		rs.recon.unreadable++
	}
	t.b.Digests = append(t.b.Digests, ArgDigest{Run: c.Run, Index: l.Index, Pos: c.ToolUsesDropped, Kind: DigestModelCall, Tool: mark})
	rs.recon.modelCalls++
	rs.recon.dropped += c.ToolUsesDropped
	rs.lastActivity = t.now
	return nil
}

// flushLocalInbox runs Options.FlushInbox, if set.
func (s *Signer) flushLocalInbox(ctx context.Context) {
	if f := s.opts.FlushInbox; f != nil {
		if err := f(ctx); err != nil {
			s.log.WarnContext(ctx, "flushing this replica's model calls before a close failed", "err", err)
		}
	}
}

// inboxLoop drains the inbox every Options.InboxInterval.
func (s *Signer) inboxLoop() {
	s.every(s.opts.InboxInterval, func() {
		if _, err := s.DrainInbox(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			s.log.Warn("model-call inbox drain failed", "err", err)
		}
	})
}
