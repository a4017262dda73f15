package agenthook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentcustody/custody/client"
)

// Sentinel errors. Every error [Handle] reports wraps one of them.
var (
	// ErrMalformed: the event on stdin is not one the agent's docs
	// describe (not JSON, no session_id or hook_event_name, a tool event
	// without tool_name, tool_input not JSON, another agent's pre-tool
	// event).
	ErrMalformed = errors.New("malformed hook event")
	// ErrUnknownAgent: not one of [Agents].
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrConfig: custody's client or the state directory is not
	// configured (CUSTODY_URL, CUSTODY_TOKEN_FILE, ...).
	ErrConfig = errors.New("custody hook not configured")
	// ErrState: the session's state file could not be locked, read or
	// written.
	ErrState = errors.New("hook state")
	// ErrSigner: custody could not be reached, refused the call, or
	// answered something this package does not understand.
	ErrSigner = errors.New("custody signer")
)

// Signer is the part of custody's client the hooks call; *client.Client
// implements it. Implementations must be safe for one goroutine.
type Signer interface {
	RegisterRun(ctx context.Context) (client.Run, error)
	Decide(ctx context.Context, run, callID, tool string, args json.RawMessage) (client.Decision, error)
	Complete(ctx context.Context, run, callID, outcome string) (client.Appended, error)
	CloseRun(ctx context.Context, run string) (client.Appended, error)
	RequestApproval(ctx context.Context, run, callID, tool string, args json.RawMessage) (client.Approval, error)
	WaitApproval(ctx context.Context, run, id string, wait time.Duration) (client.Approval, error)
	ConsumeApproval(ctx context.Context, run, id string, args json.RawMessage) (client.Approval, error)
}

var _ Signer = (*client.Client)(nil)

// AskMode says what a call the policy decides "ask" becomes.
type AskMode string

const (
	// AskApproval (the default) uses custody's approval flow: the hook
	// requests an approval bound to the call's exact arguments, waits up
	// to Options.ApprovalWait for an operator to approve it on the admin
	// listener, consumes it and allows the call; denied, expired or
	// still pending, the call is denied. The approval is signed into the
	// run, so the record shows who let the call through.
	AskApproval AskMode = "approval"
	// AskAgent answers Claude Code's own "ask" (the person at the
	// terminal is prompted; the log shows the call decided ask and then
	// completed, with no approval record). Gemini CLI and Codex have no
	// documented ask for a hook, so they use AskApproval regardless.
	AskAgent AskMode = "agent"
)

// ParseAskMode reads CUSTODY_HOOK_ASK ("" is AskApproval).
func ParseAskMode(s string) (AskMode, error) {
	switch AskMode(s) {
	case "", AskApproval:
		return AskApproval, nil
	case AskAgent:
		return AskAgent, nil
	}
	return "", fmt.Errorf("%w: CUSTODY_HOOK_ASK=%q (want approval or agent)", ErrConfig, s)
}

// Options configures [Handle].
type Options struct {
	// Agent whose protocol is spoken. Required.
	Agent Agent
	// Signer is custody's client. Nil means it could not be built:
	// ConfigErr says why, every tool call is denied and other events
	// report ConfigErr.
	Signer    Signer
	ConfigErr error
	// StateDir holds the session state files (see [StateDir]). Empty is
	// a configuration error.
	StateDir string
	// Ask is what "ask" becomes; zero is AskApproval.
	Ask AskMode
	// ApprovalWait is how long a call decided ask waits for an operator
	// (AskApproval). Zero is 50 s, under the agents' default hook
	// timeout of 60 s; it is also cut short by ctx's deadline.
	ApprovalWait time.Duration
	// LockPoll is how often a session lock held by another hook process
	// is retried. Zero is 10 ms.
	LockPoll time.Duration
}

// Result is a hook process's answer: what to write on stdout and stderr
// and the exit code.
type Result struct {
	Stdout []byte
	Stderr string
	Exit   int
}

// Handle answers one hook event (the bytes the agent wrote on stdin).
// It never panics on any input and never writes a tool's arguments, the
// key or the token into the Result.
func Handle(ctx context.Context, opts Options, stdin []byte) Result {
	if opts.ApprovalWait <= 0 {
		opts.ApprovalWait = 50 * time.Second
	}
	if opts.LockPoll <= 0 {
		opts.LockPoll = 10 * time.Millisecond
	}
	if opts.Ask == "" {
		opts.Ask = AskApproval
	}
	ev, err := ParseEvent(opts.Agent, stdin)
	if err != nil {
		if kind, ok := lenientKind(opts.Agent, stdin); ok && kind != KindPreTool {
			return report(opts.Agent, err)
		}
		return failClosed(err)
	}
	h := handler{opts: opts, files: stateFiles{dir: opts.StateDir, poll: opts.LockPoll}}
	if ev.Kind == KindPreTool {
		return h.preTool(ctx, ev)
	}
	if err := h.other(ctx, ev); err != nil {
		return report(opts.Agent, err)
	}
	return quiet(opts.Agent)
}

// lenientKind reads only hook_event_name from a malformed event, so a
// malformed post-tool or session event is reported, not turned into a
// block the docs give no meaning to.
func lenientKind(a Agent, stdin []byte) (Kind, bool) {
	var w struct {
		Name string `json:"hook_event_name"`
	}
	if json.Unmarshal(stdin, &w) != nil {
		return 0, false
	}
	k, ok := eventNames[a][w.Name]
	return k, ok
}

type handler struct {
	opts  Options
	files stateFiles
}

func (h handler) ready() error {
	if h.opts.Signer == nil {
		if h.opts.ConfigErr != nil {
			return h.opts.ConfigErr
		}
		return fmt.Errorf("%w: no custody client", ErrConfig)
	}
	if h.files.dir == "" {
		return fmt.Errorf("%w: no state directory", ErrConfig)
	}
	return nil
}

// other handles every event but a pre-tool one.
func (h handler) other(ctx context.Context, ev Event) error {
	if err := h.ready(); err != nil {
		return err
	}
	switch ev.Kind {
	case KindSessionEnd:
		var closeErr error
		err := h.files.update(ctx, ev.Agent, ev.SessionID, func(st *sessionState) (bool, error) {
			if st.Run != "" {
				if _, err := h.opts.Signer.CloseRun(ctx, st.Run); err != nil && !isCode(err, "run_closed") {
					closeErr = fmt.Errorf("%w: close run %s: %w", ErrSigner, st.Run, err)
				}
			}
			return true, nil
		})
		return errors.Join(err, closeErr)
	case KindPostTool:
		run, callID, err := h.pairPost(ctx, ev)
		if err != nil {
			return err
		}
		if callID == "" {
			return fmt.Errorf("%w: no decided %s call of this session matches this %s", ErrSigner, ev.Tool, ev.Name)
		}
		if _, err := h.opts.Signer.Complete(ctx, run, callID, ev.Outcome); err != nil {
			return fmt.Errorf("%w: complete call %s in run %s: %w", ErrSigner, callID, run, err)
		}
		return nil
	default:
		_, _, err := h.prepare(ctx, ev, false)
		return err
	}
}

// prepare registers the session's run if it has none and, with assign,
// returns the call id for a pre-tool event: its tool_use_id, or for an
// agent without one "g-ARGSKEY-N", N counting this session's calls with
// the same tool and arguments ([handler.pend] records it for the
// post-tool event once the call may run).
func (h handler) prepare(ctx context.Context, ev Event, assign bool) (run, callID string, err error) {
	err = h.files.update(ctx, ev.Agent, ev.SessionID, func(st *sessionState) (bool, error) {
		if st.Run == "" {
			r, err := h.opts.Signer.RegisterRun(ctx)
			if err != nil {
				return false, fmt.Errorf("%w: register run: %w", ErrSigner, err)
			}
			if r.Run == "" {
				return false, fmt.Errorf("%w: register run: no run id in the answer", ErrSigner)
			}
			st.Run = r.Run
		}
		run = st.Run
		if assign {
			if callID = ev.CallID(); callID == "" {
				k := ev.ArgsKey()
				if st.Next == nil {
					st.Next = map[string]int{}
				}
				st.Next[k]++
				callID = fmt.Sprintf("g-%s-%d", k, st.Next[k])
			}
		}
		return false, nil
	})
	return run, callID, err
}

// pairPost returns the run and the call id a post-tool event completes:
// its tool_use_id, or the pending call with the same tool and arguments
// allowed first ("" if none).
func (h handler) pairPost(ctx context.Context, ev Event) (run, callID string, err error) {
	if callID = ev.CallID(); callID != "" {
		run, _, err = h.prepare(ctx, ev, false)
		return run, callID, err
	}
	err = h.files.update(ctx, ev.Agent, ev.SessionID, func(st *sessionState) (bool, error) {
		run = st.Run
		k := ev.ArgsKey()
		if p := st.Pending[k]; len(p) > 0 {
			callID = p[0]
			st.Pending[k] = p[1:]
			if len(st.Pending[k]) == 0 {
				delete(st.Pending, k)
			}
		}
		return false, nil
	})
	if err == nil && run == "" {
		err = fmt.Errorf("%w: no run for this session: the call was never decided", ErrSigner)
	}
	return run, callID, err
}

// pend records callID as pending for the post-tool event to find, for
// an agent without tool_use_id; the pre-tool event is answered only
// after, so the call is pending before it can run. Only a call that may
// run is pending: one still being decided (and perhaps denied) with the
// same tool and arguments is not, so an AfterTool completes a call that
// ran.
func (h handler) pend(ctx context.Context, ev Event, callID string) error {
	if ev.CallID() != "" {
		return nil
	}
	return h.files.update(ctx, ev.Agent, ev.SessionID, func(st *sessionState) (bool, error) {
		if st.Pending == nil {
			st.Pending = map[string][]string{}
		}
		k := ev.ArgsKey()
		st.Pending[k] = append(st.Pending[k], callID)
		return false, nil
	})
}

// mayRun answers r, a pre-tool answer that lets the call run, once the
// call is pending; if it cannot be recorded the call is blocked.
func (h handler) mayRun(ctx context.Context, ev Event, callID string, r Result) Result {
	if err := h.pend(ctx, ev, callID); err != nil {
		return failClosed(err)
	}
	return r
}

func (h handler) preTool(ctx context.Context, ev Event) Result {
	if err := h.ready(); err != nil {
		return failClosed(err)
	}
	run, callID, err := h.prepare(ctx, ev, true)
	if err != nil {
		return failClosed(err)
	}
	d, err := h.opts.Signer.Decide(ctx, run, callID, ev.Tool, ev.Args)
	if isCode(err, "run_closed") {
		// The signer closed the run (idle_s): start a new one for the
		// session and decide there.
		if run, err = h.renew(ctx, ev, run); err == nil {
			d, err = h.opts.Signer.Decide(ctx, run, callID, ev.Tool, ev.Args)
		}
	}
	if err != nil {
		return failClosed(fmt.Errorf("%w: decide %s (run %s, call %s): %w", ErrSigner, ev.Tool, run, callID, err))
	}
	where := fmt.Sprintf("run %s, call %s", run, callID)
	rules := ruleList(d.RuleIDs)
	switch d.Effect {
	case "allow":
		return h.mayRun(ctx, ev, callID, allow(ev.Agent, fmt.Sprintf("custody allowed %s: %s (%s)", ev.Tool, rules, where)))
	case "deny":
		return deny(ev.Agent, fmt.Sprintf("custody denied %s: %s (%s)", ev.Tool, rules, where))
	case "ask":
		if h.opts.Ask == AskAgent && ev.Agent == ClaudeCode {
			return h.mayRun(ctx, ev, callID, ask(ev.Agent, fmt.Sprintf("custody: %s asks for a person's approval of %s (%s)", rules, ev.Tool, where)))
		}
		r, ok := h.approval(ctx, ev, run, callID, rules, where)
		if ok {
			return h.mayRun(ctx, ev, callID, r)
		}
		return r
	default:
		return failClosed(fmt.Errorf("%w: decide %s answered effect %q (%s)", ErrSigner, ev.Tool, d.Effect, where))
	}
}

// renew replaces the session's run closed by the signer with a new one
// (once, whichever hook process gets there first).
func (h handler) renew(ctx context.Context, ev Event, closed string) (string, error) {
	var run string
	err := h.files.update(ctx, ev.Agent, ev.SessionID, func(st *sessionState) (bool, error) {
		if st.Run == closed || st.Run == "" {
			r, err := h.opts.Signer.RegisterRun(ctx)
			if err != nil {
				return false, fmt.Errorf("%w: register run: %w", ErrSigner, err)
			}
			st.Run = r.Run
		}
		run = st.Run
		return false, nil
	})
	return run, err
}

// approval runs custody's approval flow for a call decided ask; ok
// reports whether the call may run.
func (h handler) approval(ctx context.Context, ev Event, run, callID, rules, where string) (r Result, ok bool) {
	s := h.opts.Signer
	a, err := s.RequestApproval(ctx, run, callID, ev.Tool, ev.Args)
	if err != nil {
		return failClosed(fmt.Errorf("%w: request approval for %s (%s): %w", ErrSigner, ev.Tool, where, err)), false
	}
	id := a.ID
	deadline := time.Now().Add(h.opts.ApprovalWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(deadline) {
		deadline = d.Add(-time.Second)
	}
	for a.State == "pending" {
		// WaitApproval waits whole seconds (at most 60).
		left := time.Until(deadline)
		if left < time.Second/2 {
			break
		}
		if a, err = s.WaitApproval(ctx, run, id, min(max(left.Round(time.Second), time.Second), 60*time.Second)); err != nil {
			return failClosed(fmt.Errorf("%w: wait for approval %s: %w", ErrSigner, id, err)), false
		}
	}
	switch a.State {
	case "approved":
		if _, err := s.ConsumeApproval(ctx, run, id, ev.Args); err != nil {
			return failClosed(fmt.Errorf("%w: consume approval %s: %w", ErrSigner, id, err)), false
		}
		return allow(ev.Agent, fmt.Sprintf("custody allowed %s: an operator approved it (approval %s; %s; %s)", ev.Tool, id, rules, where)), true
	case "pending":
		return deny(ev.Agent, fmt.Sprintf("custody denied %s: %s need an operator's approval, and approval %s was not given within %s (%s)",
			ev.Tool, rules, id, h.opts.ApprovalWait, where)), false
	default:
		return deny(ev.Agent, fmt.Sprintf("custody denied %s: approval %s is %s (%s; %s)", ev.Tool, id, a.State, rules, where)), false
	}
}

// ruleList names the rules that decided a call.
func ruleList(ids []string) string {
	switch len(ids) {
	case 0:
		return "no rule allows it (default deny)"
	case 1:
		return "rule " + ids[0]
	}
	return "rules " + strings.Join(ids, ", ")
}

// isCode reports whether err is custody's refusal with error code code.
func isCode(err error, code string) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == code && ce.Status == http.StatusConflict
}
