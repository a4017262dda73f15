// Package mcptool serves a custody service's calls as MCP tools: one
// stateless streamable-HTTP server (JSON responses) behind the bearer-key
// guard of mcpauth, tools whose schemas are inferred from Go types, and
// refusals sent as tool errors whose text is the HTTP API's JSON error
// body for the same refusal. The memory and signer tools use it.
package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcpauth"
)

// RefuseFunc returns the HTTP API's JSON error body for err, a refusal
// of tool. It logs what needs logging (a store failure) and must not put
// a store error's text, a key or a token in the body.
type RefuseFunc func(ctx context.Context, tool string, err error) []byte

// Server is an MCP server under construction. Add tools with [Add], then
// serve it with [Server.Handler].
type Server struct {
	mcp    *mcp.Server
	log    *slog.Logger
	refuse RefuseFunc
	// StrictArgs, if set (before tools are added), reads each call's raw
	// arguments once more into a new In before the handler runs (the SDK
	// validates them against the schema, but lets the last of duplicate
	// members win); its error refuses the call, as a refusal of the
	// handler would be. Calls without arguments are not checked.
	StrictArgs func(data []byte, v any) error
	// Raw, if set with StrictArgs (before tools are added), gives each
	// handler the In that StrictArgs reads from the call's arguments as
	// sent (after the schema check), and sends its result as
	// encoding/json encodes it. The SDK's typed tools decode both into
	// map[string]any to check them against their schemas and encode them
	// again, so a json.RawMessage in either would lose its numbers'
	// precision (12345678901234567890 becomes 12345678901234567000) and
	// its members' order.
	Raw bool
}

// NewServer returns a server named name (e.g. "custody-memory") that
// gives clients instructions, logs to log, and turns refusals into tool
// errors with refuse.
func NewServer(name, instructions string, log *slog.Logger, refuse RefuseFunc) *Server {
	return &Server{
		mcp:    mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{Logger: log, Instructions: instructions}),
		log:    log,
		refuse: refuse,
	}
}

// Handler returns the server over streamable HTTP, stateless (no MCP
// session another identity could reuse) with JSON responses and request
// bodies of at most maxBody bytes. Every request must carry
// "Authorization: Bearer <key>" that verify accepts (see
// [mcpauth.Require]); a refused key gets 401.
func (s *Server) Handler(verify mcpauth.VerifyFunc, maxBody int64) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              s.log,
		MaxRequestBodyBytes: maxBody,
	})
	return mcpauth.Require(verify, s.log, h)
}

// schemaOptions infer tool schemas; a json.RawMessage is any JSON value.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
}}

// Schema returns the JSON schema inferred for T, the way [Add] infers a
// tool's schemas (jsonschema struct tags give descriptions; a
// json.RawMessage is any JSON value), for a caller that wants to add
// bounds before setting it as a tool's InputSchema. It panics if T has
// no schema (a programming error found at start-up).
func Schema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcptool: schema of %v: %v", reflect.TypeFor[T](), err))
	}
	return s
}

// Add adds tool to s, served by h with the verified key record of the
// request. The input and output schemas are inferred from In and Out
// unless tool sets them. An error from h becomes a tool error whose text
// is s's refusal body for it.
func Add[In, Out any](s *Server, tool *mcp.Tool, h func(context.Context, apikey.Record, In) (Out, error)) {
	if tool.InputSchema == nil {
		tool.InputSchema = Schema[In]()
	}
	if tool.OutputSchema == nil {
		tool.OutputSchema = Schema[Out]()
	}
	if s.Raw {
		addRaw(s, tool, h)
		return
	}
	mcp.AddTool(s.mcp, tool, func(ctx context.Context, req *mcp.CallToolRequest, args In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		rec, ok := mcpauth.Record(req)
		if !ok {
			return nil, zero, s.toolError(ctx, tool.Name, errNoKey)
		}
		if strict := s.StrictArgs; strict != nil && len(req.Params.Arguments) > 0 {
			if err := strict(req.Params.Arguments, new(In)); err != nil {
				return nil, zero, s.toolError(ctx, tool.Name, err)
			}
		}
		out, err := h(ctx, rec, args)
		if err != nil {
			return nil, zero, s.toolError(ctx, tool.Name, err)
		}
		return nil, out, nil
	})
}

// addRaw is Add for a Raw server: the tool is added with the SDK's
// untyped API, which leaves the arguments and the result to it.
func addRaw[In, Out any](s *Server, tool *mcp.Tool, h func(context.Context, apikey.Record, In) (Out, error)) {
	if s.StrictArgs == nil {
		panic("mcptool: a Raw server needs StrictArgs")
	}
	in, ok := tool.InputSchema.(*jsonschema.Schema)
	if !ok {
		panic(fmt.Sprintf("mcptool: tool %s: a Raw server needs a *jsonschema.Schema input schema", tool.Name))
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcptool: tool %s: input schema: %v", tool.Name, err))
	}
	s.mcp.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var res mcp.CallToolResult
		rec, ok := mcpauth.Record(req)
		if !ok {
			res.SetError(s.toolError(ctx, tool.Name, errNoKey))
			return &res, nil
		}
		data := []byte(req.Params.Arguments)
		if len(data) == 0 {
			data = []byte("{}")
		}
		// The schema check reads a copy; the handler gets the arguments as sent.
		var checked map[string]any
		err := json.Unmarshal(data, &checked)
		if err == nil {
			err = resolved.Validate(checked)
		}
		if err != nil {
			res.SetError(fmt.Errorf("validating \"arguments\": %v", err))
			return &res, nil
		}
		var args In
		if err := s.StrictArgs(data, &args); err != nil {
			res.SetError(s.toolError(ctx, tool.Name, err))
			return &res, nil
		}
		out, err := h(ctx, rec, args)
		if err != nil {
			res.SetError(s.toolError(ctx, tool.Name, err))
			return &res, nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		res.StructuredContent = json.RawMessage(b)
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		return &res, nil
	})
}

var errNoKey = fmt.Errorf("mcptool: MCP request without a verified key")

// ToolError is a refused tool call. Its text, which the SDK sends as the
// tool result's content, is the HTTP API's JSON error body for the same
// refusal.
type ToolError struct {
	Body []byte // the JSON error body
	Err  error  // the refusal, for errors.Is/As
}

func (e *ToolError) Error() string { return string(e.Body) }
func (e *ToolError) Unwrap() error { return e.Err }

func (s *Server) toolError(ctx context.Context, tool string, err error) error {
	return &ToolError{Body: s.refuse(ctx, tool, err), Err: err}
}
