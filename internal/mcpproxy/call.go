package mcpproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/internal/signer"
)

// SignerTool is the tool name a call of tool on upstream server is
// decided and recorded under: "mcp__{server}__{tool}", the name Claude
// Code gives MCP tools, so that decisions and the model's tool uses can
// be matched.
func SignerTool(server, tool string) string { return "mcp__" + server + "__" + tool }

// Outcomes of call.completed written by the proxy.
const (
	OutcomeOK              = "ok"               // the upstream answered a result without isError
	OutcomeError           = "error"            // isError, or the upstream failed, was too large or malformed
	OutcomeApprovalDenied  = "approval_denied"  // ask: an operator denied, or the approval expired; not forwarded
	OutcomeApprovalTimeout = "approval_timeout" // ask: not resolved within ApprovalWait; not forwarded
)

// listError is a tools/list failure as a JSON-RPC error; msg is fixed
// text (never an upstream's error text).
func listError(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}

// listTools forwards tools/list, keeping the tools the config offers and
// the tenant's policy may allow.
func (s *session) listTools(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	p, up := s.srv.p, s.srv.up
	cs, err := s.upstream(ctx)
	if err != nil {
		p.log.WarnContext(ctx, "mcp upstream unreachable", "server", up.Name, "err", s.logErr(err))
		return nil, listError("upstream MCP server unavailable")
	}
	params := &mcp.ListToolsParams{}
	if req.Params != nil {
		params.Cursor = req.Params.Cursor
	}
	cctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	res, err := cs.ListTools(cctx, params)
	if err != nil {
		p.log.WarnContext(ctx, "mcp upstream tools/list failed", "server", up.Name, "err", s.logErr(err))
		s.drop(cs)
		return nil, listError("upstream MCP server failed to list its tools")
	}
	out := &mcp.ListToolsResult{NextCursor: res.NextCursor, Tools: []*mcp.Tool{}}
	for _, t := range res.Tools {
		if t == nil || !up.Tools.offers(t.Name) {
			continue
		}
		ok, err := p.rec.MayAllow(ctx, s.caller.Tenant, SignerTool(up.Name, t.Name))
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				p.log.ErrorContext(ctx, "mcp tools/list: policy check failed", "server", up.Name, "err", err)
			}
			return nil, listError("the signer is unavailable: tools cannot be listed")
		}
		if ok {
			out.Tools = append(out.Tools, t)
		}
	}
	if raw, err := json.Marshal(out); err != nil || s.leaks(raw) {
		p.log.WarnContext(ctx, "mcp upstream tools/list carries the upstream credential: withheld", "server", up.Name)
		return nil, listError("upstream MCP server answered a tool list that cannot be shown")
	}
	return out, nil
}

// refusal is an error result whose text is an apierror JSON body.
func refusal(code, msg string, details map[string]any) *mcp.CallToolResult {
	b, _ := json.Marshal(apierror.Body{Code: code, Message: msg, Details: details})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

func newCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return signer.MCPProxyCallPrefix + hex.EncodeToString(b[:])
}

// callTool decides the call in the session's run and forwards it only
// when allowed (directly, or by an approval consumed for its args).
func (s *session) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, up := s.srv.p, s.srv.up
	if req.Params == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
	}
	tool := req.Params.Name
	if !up.Tools.offers(tool) {
		return refusal("tool_not_offered", fmt.Sprintf("tool %q is not offered by MCP server %s", tool, up.Name), nil), nil
	}
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if foldCollision(args) {
		return refusal("bad_request", "the arguments have member names equal but for case, which upstreams read differently: the call was not forwarded", nil), nil
	}
	name := SignerTool(up.Name, tool)
	callID := newCallID()
	log := p.log.With("server", up.Name, "tool", tool, "run", s.run, "call_id", callID)
	d, err := p.rec.Decide(ctx, s.caller, s.run, signer.DecideRequest{CallID: callID, Tool: name, Args: args})
	if err != nil {
		return s.signerRefusal(ctx, log, "decide", err), nil
	}
	details := map[string]any{"call_id": callID, "tool": name, "rule_ids": d.RuleIDs}
	switch d.Effect {
	case policy.Allow:
	case policy.Ask:
		if r := s.approve(ctx, log, callID, name, args, details); r != nil {
			return r, nil
		}
	default:
		msg := fmt.Sprintf("custody policy denied %s (rules %s); the call was not forwarded", name, strings.Join(d.RuleIDs, ", "))
		if len(d.RuleIDs) == 0 {
			msg = fmt.Sprintf("custody policy denied %s (no rule allows it: default deny); the call was not forwarded", name)
		}
		log.InfoContext(ctx, "mcp call denied", "rule_ids", d.RuleIDs)
		return refusal("denied", msg, details), nil
	}
	res, outcome := s.forward(ctx, log, tool, args)
	raw, err := json.Marshal(res)
	if err != nil { // cannot happen for a result the SDK decoded
		res, outcome = refusal("upstream_malformed", "the upstream result cannot be encoded", nil), OutcomeError
		raw, _ = json.Marshal(res)
	}
	s.complete(ctx, log, callID, outcome, raw)
	return res, nil
}

// forward sends the call upstream and returns the result for the
// sandbox and its outcome. Failures become error results.
func (s *session) forward(ctx context.Context, log logger, tool string, args json.RawMessage) (*mcp.CallToolResult, string) {
	p, up := s.srv.p, s.srv.up
	cs, err := s.upstream(ctx)
	if err != nil {
		log.WarnContext(ctx, "mcp upstream unreachable", "err", s.logErr(err))
		return refusal("upstream_unavailable", fmt.Sprintf("MCP server %s is unavailable; the call was not completed", up.Name), nil), OutcomeError
	}
	// Only a name the upstream lists is forwarded (see session.lists).
	switch listed, err := s.lists(ctx, tool); {
	case err != nil:
		log.WarnContext(ctx, "mcp upstream tools/list failed", "err", s.logErr(err))
		return refusal("upstream_unavailable", fmt.Sprintf("MCP server %s is unavailable; the call was not completed", up.Name), nil), OutcomeError
	case !listed:
		log.InfoContext(ctx, "mcp call for a tool the upstream does not list: not forwarded")
		return refusal("tool_not_listed", fmt.Sprintf("tool %q is not in MCP server %s's tools/list; the call was not forwarded", tool, up.Name), nil), OutcomeError
	}
	// The exchange is not cut when the sandbox cancels or leaves: once
	// sent, the call may have run upstream, and what is recorded is the
	// upstream's answer (or CallTimeout), not the sandbox's departure.
	var trip atomic.Bool
	cctx, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), tripKey{}, &trip), p.opts.CallTimeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	var rpcErr *jsonrpc.Error
	switch {
	case trip.Load():
		log.WarnContext(ctx, "mcp upstream result too large", "limit_bytes", p.opts.MaxResultBytes)
		s.drop(cs)
		return refusal("upstream_result_too_large", fmt.Sprintf("the result of MCP server %s is larger than %d bytes", up.Name, p.opts.MaxResultBytes),
			map[string]any{"limit_bytes": p.opts.MaxResultBytes}), OutcomeError
	case errors.As(err, &rpcErr):
		// The upstream answered with a JSON-RPC error (e.g. unknown tool):
		// the session is fine.
		log.WarnContext(ctx, "mcp upstream refused the call", "code", rpcErr.Code)
		return refusal("upstream_error", fmt.Sprintf("MCP server %s refused the call (JSON-RPC error %d)", up.Name, rpcErr.Code),
			map[string]any{"rpc_code": rpcErr.Code}), OutcomeError
	case errors.Is(err, context.DeadlineExceeded):
		log.WarnContext(ctx, "mcp upstream call timed out", "timeout", p.opts.CallTimeout)
		s.drop(cs)
		return refusal("upstream_timeout", fmt.Sprintf("MCP server %s did not answer within %v", up.Name, p.opts.CallTimeout), nil), OutcomeError
	case err != nil:
		log.WarnContext(ctx, "mcp upstream call failed", "err", s.logErr(err))
		s.drop(cs)
		return refusal("upstream_failed", fmt.Sprintf("MCP server %s failed or answered a malformed result", up.Name), nil), OutcomeError
	case res == nil:
		return refusal("upstream_failed", fmt.Sprintf("MCP server %s answered no result", up.Name), nil), OutcomeError
	}
	raw, err := json.Marshal(res)
	if err != nil || int64(len(raw)) > p.opts.MaxResultBytes {
		log.WarnContext(ctx, "mcp upstream result too large", "limit_bytes", p.opts.MaxResultBytes)
		return refusal("upstream_result_too_large", fmt.Sprintf("the result of MCP server %s is larger than %d bytes", up.Name, p.opts.MaxResultBytes),
			map[string]any{"limit_bytes": p.opts.MaxResultBytes}), OutcomeError
	}
	if s.leaks(raw) {
		log.WarnContext(ctx, "mcp upstream result carries the upstream credential: withheld")
		return refusal("upstream_result_withheld", fmt.Sprintf("the result of MCP server %s carries its credential and was withheld", up.Name), nil), OutcomeError
	}
	if res.IsError {
		return res, OutcomeError
	}
	return res, OutcomeOK
}

// approve runs the approval flow of a call decided ask: request an
// approval, wait up to ApprovalWait, consume it. It returns nil when the
// call may be forwarded, else the error result (after recording the
// outcome when the call will not run).
func (s *session) approve(ctx context.Context, log logger, callID, name string, args json.RawMessage, details map[string]any) *mcp.CallToolResult {
	p := s.srv.p
	a, err := signer.AwaitApproval(ctx, p.rec, s.caller, s.run, signer.ApprovalRequest{CallID: callID, Tool: name, Args: args}, p.opts.ApprovalWait)
	if a.ID != "" {
		details["approval_id"] = a.ID
	}
	if err != nil {
		return s.signerRefusal(ctx, log, "approval", err)
	}
	log.InfoContext(ctx, "mcp call approval ended", "approval_id", a.ID, "state", a.State, "rule_ids", details["rule_ids"])
	switch a.State {
	case signer.ApprovalConsumed:
		return nil
	case signer.ApprovalPending:
		r := refusal("approval_timeout", fmt.Sprintf("%s needs an operator's approval (approval_id %s), not given within %v; the call was not forwarded",
			name, a.ID, p.opts.ApprovalWait), details)
		s.complete(ctx, log, callID, OutcomeApprovalTimeout, nil)
		return r
	default: // denied, expired
		r := refusal("approval_denied", fmt.Sprintf("%s was not approved (approval %s is %s); the call was not forwarded", name, a.ID, a.State), details)
		s.complete(ctx, log, callID, OutcomeApprovalDenied, nil)
		return r
	}
}

type logger interface {
	InfoContext(context.Context, string, ...any)
	WarnContext(context.Context, string, ...any)
	ErrorContext(context.Context, string, ...any)
}

// complete records call.completed; the sandbox's context may be gone.
func (s *session) complete(ctx context.Context, log logger, callID, outcome string, result json.RawMessage) {
	p := s.srv.p
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := p.rec.Complete(cctx, s.caller, s.run, signer.CompleteRequest{CallID: callID, Outcome: outcome, Result: result}); err != nil {
		log.ErrorContext(ctx, "mcp call completed but not recorded", "outcome", outcome, "err", err)
	}
}

// signerRefusal is the error result for a signer failure: the call is
// not forwarded (fail closed).
func (s *session) signerRefusal(ctx context.Context, log logger, op string, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, ErrUnavailable):
		return refusal("signer_unavailable", "the signer is unavailable: the call was not forwarded", nil)
	case errors.Is(err, signer.ErrInvalid):
		log.InfoContext(ctx, "mcp call refused by the signer", "op", op, "err", err)
		return refusal("bad_request", "the signer refused the call as malformed (tool name or arguments): the call was not forwarded", nil)
	case errors.Is(err, signer.ErrForbidden), errors.Is(err, signer.ErrNotFound), errors.Is(err, signer.ErrRunClosed):
		log.InfoContext(ctx, "mcp call refused by the signer", "op", op, "err", err)
		return refusal("run_refused", fmt.Sprintf("the session's run %s is closed or not this agent's: the call was not forwarded", s.run), nil)
	default:
		log.ErrorContext(ctx, "mcp call: signer failed", "op", op, "err", err)
		return refusal("signer_unavailable", "the signer could not decide the call ("+signer.ErrorCode(err)+"): the call was not forwarded", nil)
	}
}

// foldCollision reports whether an object in args (at any depth) has two
// member names equal under Unicode case folding ({"text":..,"TEXT":..}),
// or args is not JSON. The signer decides on the exact names, while an
// upstream that binds names case-insensitively, the last one winning (Go
// encoding/json into a struct, System.Text.Json's case-insensitive
// option), would run the call with the other member's value.
func foldCollision(args []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber() // a number is not converted (1e400 is the signer's to refuse)
	collide, err := foldValue(dec)
	return collide || err != nil
}

func foldValue(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]struct{}{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return false, err
			}
			name, _ := k.(string)
			f := strings.Map(foldRune, name)
			if _, dup := seen[f]; dup {
				return true, nil
			}
			seen[f] = struct{}{}
			if c, err := foldValue(dec); c || err != nil {
				return c, err
			}
		}
	case json.Delim('['):
		for dec.More() {
			if c, err := foldValue(dec); c || err != nil {
				return c, err
			}
		}
	default:
		return false, nil
	}
	_, err = dec.Token() // the closing delimiter
	return false, err
}

// foldRune is the smallest rune of r's case-folding orbit (K, k and
// KELVIN SIGN all give K), so that two names are equal under
// strings.EqualFold exactly when their mapped forms are equal.
func foldRune(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}
