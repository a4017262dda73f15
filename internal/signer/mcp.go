package signer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcpauth"
	"github.com/agentcustody/custody/internal/mcptool"
	"github.com/agentcustody/custody/verify"
)

// RunArgs name the caller's run: the arguments of signer_close_run and
// signer_status, and part of every per-run tool's arguments.
type RunArgs struct {
	Run string `json:"run" jsonschema:"the run id returned by signer_register_run"`
}

// RegisterRunArgs are the (no) arguments of signer_register_run.
type RegisterRunArgs struct{}

// DecideArgs are the arguments of signer_decide.
type DecideArgs struct {
	RunArgs
	CallID string          `json:"call_id" jsonschema:"the caller's id of this tool call, unique within the run (printable, at most 128 bytes)"`
	Tool   string          `json:"tool" jsonschema:"the tool to be called, e.g. Bash or WebFetch"`
	Args   json.RawMessage `json:"args,omitempty" jsonschema:"the tool's arguments: a JSON object; only a salted commitment to them is logged"`
}

// CompleteArgs are the arguments of signer_complete.
type CompleteArgs struct {
	RunArgs
	CallID  string `json:"call_id" jsonschema:"the call_id of a decided call"`
	Outcome string `json:"outcome" jsonschema:"a short word such as ok or error (at most 64 bytes); not the call's output"`
}

// ModelEventArgs are the arguments of signer_model_event: metadata about
// one model call, never its prompt or output.
type ModelEventArgs struct {
	RunArgs
	Event        string `json:"event" jsonschema:"what happened, e.g. request or response (at most 64 bytes)"`
	Provider     string `json:"provider,omitempty" jsonschema:"optional model provider"`
	Model        string `json:"model,omitempty" jsonschema:"optional model name"`
	RequestID    string `json:"request_id,omitempty" jsonschema:"optional provider request id"`
	StopReason   string `json:"stop_reason,omitempty" jsonschema:"optional stop reason"`
	InputTokens  int64  `json:"input_tokens,omitempty" jsonschema:"optional input token count"`
	OutputTokens int64  `json:"output_tokens,omitempty" jsonschema:"optional output token count"`
}

// RequestApprovalArgs are the arguments of signer_request_approval.
type RequestApprovalArgs struct {
	RunArgs
	CallID string          `json:"call_id" jsonschema:"the call_id of a call decided ask"`
	Tool   string          `json:"tool" jsonschema:"the tool the call was decided with"`
	Args   json.RawMessage `json:"args,omitempty" jsonschema:"exactly the args the call was decided with"`
}

// WaitApprovalArgs are the arguments of signer_wait_approval.
type WaitApprovalArgs struct {
	RunArgs
	ApprovalID  string `json:"approval_id" jsonschema:"the approval_id returned by signer_request_approval"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"how long to wait for a pending approval to be resolved, 0 to 60 seconds; default 0 (answer at once)"`
}

// ConsumeApprovalArgs are the arguments of signer_consume_approval.
type ConsumeApprovalArgs struct {
	RunArgs
	ApprovalID string          `json:"approval_id" jsonschema:"the approval_id of an approved approval"`
	Args       json.RawMessage `json:"args,omitempty" jsonschema:"exactly the args the approval is bound to"`
}

// MCPHandler returns an MCP server (streamable HTTP transport, stateless,
// JSON responses) for mounting at /mcp/signer, with the tools
// signer_register_run, signer_decide, signer_complete, signer_model_event,
// signer_request_approval, signer_wait_approval, signer_consume_approval,
// signer_close_run and signer_status. Each acts as the key's identity and
// calls the same method as the HTTP API (see [Signer.Handler]), so the
// same ownership checks apply, and returns the same JSON; a refusal is a
// tool error whose text is the HTTP API's error body, e.g.
// {"error":"forbidden","message":...}.
//
// Every HTTP request must carry "Authorization: Bearer <key>", checked
// with verifyKey; a refused key gets 401 and is logged at Debug by its
// SHA-256 only. Being stateless, the server keeps no MCP session another
// identity could reuse.
func (s *Signer) MCPHandler(verifyKey func(ctx context.Context, key string) (apikey.Record, error)) http.Handler {
	server := mcptool.NewServer("custody-signer",
		"Policy decisions and the signed, append-only record of this agent's runs, kept outside the sandbox.", s.log, s.refusal)
	server.StrictArgs = func(data []byte, v any) error { // as strictly as HTTP bodies (decode)
		if err := verify.DecodeJSON(data, v); err != nil {
			return fmt.Errorf("%w: arguments: %w", ErrInvalid, err)
		}
		return nil
	}
	no, yes := false, true
	closed := &no
	addSignerTool(server, &mcp.Tool{Name: "signer_register_run", Description: "Start a run for this agent; returns its run id.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, _ RegisterRunArgs) (RunInfo, error) {
			return s.Register(ctx, c)
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_decide", Description: "Ask the policy whether a tool call may run (allow, deny or ask); " +
		"the decision is signed and recorded in the run.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a DecideArgs) (DecideResponse, error) {
			if err := agentCallID(a.CallID); err != nil {
				return DecideResponse{}, err
			}
			return s.Decide(ctx, c, a.Run, DecideRequest{CallID: a.CallID, Tool: a.Tool, Args: a.Args})
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_complete", Description: "Record the outcome of a decided call.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a CompleteArgs) (Appended, error) {
			if err := agentCallID(a.CallID); err != nil {
				return Appended{}, err
			}
			return s.Complete(ctx, c, a.Run, CompleteRequest{CallID: a.CallID, Outcome: a.Outcome})
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_model_event", Description: "Record metadata about one model call (never its prompt or output).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a ModelEventArgs) (Appended, error) {
			return s.RecordModelEvent(ctx, c, a.Run, ModelEvent{Event: a.Event, Provider: a.Provider, Model: a.Model,
				RequestID: a.RequestID, StopReason: a.StopReason, InputTokens: a.InputTokens, OutputTokens: a.OutputTokens})
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_request_approval", Description: "Ask an operator to approve a call decided ask, " +
		"bound to its exact tool and args.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a RequestApprovalArgs) (ApprovalInfo, error) {
			if err := agentCallID(a.CallID); err != nil {
				return ApprovalInfo{}, err
			}
			return s.RequestApproval(ctx, c, a.Run, ApprovalRequest{CallID: a.CallID, Tool: a.Tool, Args: a.Args})
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_wait_approval", Description: "Read an approval, waiting up to wait_seconds (at most 60) " +
		"while it is pending.", InputSchema: waitApprovalSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a WaitApprovalArgs) (ApprovalInfo, error) {
			if a.WaitSeconds < 0 || a.WaitSeconds > int(MaxWait/time.Second) {
				return ApprovalInfo{}, fmt.Errorf("%w: wait_seconds is 0 to %d", ErrInvalid, int(MaxWait/time.Second))
			}
			return s.WaitApproval(ctx, c, a.Run, a.ApprovalID, time.Duration(a.WaitSeconds)*time.Second)
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_consume_approval", Description: "Use an approved approval once, with exactly its args.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a ConsumeApprovalArgs) (ApprovalInfo, error) {
			return s.ConsumeApproval(ctx, c, a.Run, a.ApprovalID, ConsumeRequest{Args: a.Args})
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_close_run", Description: "Close a run; later calls in it are refused and recorded.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: false, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a RunArgs) (Appended, error) {
			return s.CloseRun(ctx, c, a.Run)
		})
	addSignerTool(server, &mcp.Tool{Name: "signer_status", Description: "Read a run's state: closed or not, records, pending approvals.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: closed}},
		func(ctx context.Context, c apikey.Identity, a RunArgs) (RunInfo, error) {
			return s.Status(ctx, c, a.Run)
		})

	return server.Handler(mcpauth.VerifyFunc(verifyKey), 3*maxBody+1<<16)
}

// waitApprovalSchema is WaitApprovalArgs' schema with wait_seconds
// bounded to 0..MaxWait seconds.
func waitApprovalSchema() *jsonschema.Schema {
	sc := mcptool.Schema[WaitApprovalArgs]()
	lo, hi := 0.0, float64(MaxWait/time.Second)
	p := sc.Properties["wait_seconds"]
	p.Minimum, p.Maximum = &lo, &hi
	return sc
}

// addSignerTool adds tool, served by h as the caller's identity.
func addSignerTool[In, Out any](server *mcptool.Server, tool *mcp.Tool, h func(context.Context, apikey.Identity, In) (Out, error)) {
	mcptool.Add(server, tool, func(ctx context.Context, rec apikey.Record, args In) (Out, error) {
		return h(ctx, rec.Identity, args)
	})
}

// refusal is err as the HTTP API's error body (see writeError).
func (s *Signer) refusal(ctx context.Context, tool string, err error) []byte {
	code := ErrorCode(err)
	msg := errorMessage[code]
	if code == "bad_request" {
		msg = err.Error()
	}
	if code == "unavailable" {
		s.log.ErrorContext(ctx, "signer tool failed", "tool", tool, "err", err)
	}
	b, _ := json.Marshal(apierror.Body{Code: code, Message: msg})
	return b
}
