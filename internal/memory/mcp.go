package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcpauth"
	"github.com/agentcustody/custody/internal/mcptool"
)

// VerifyKeyFunc verifies a bearer key and returns its record, failing
// with an error wrapping [apikey.ErrUnauthenticated] for a refused key
// ([apikey.Service.Verify] fits).
type VerifyKeyFunc func(ctx context.Context, key string) (apikey.Record, error)

// NamespaceArgs are the optional namespace arguments of every tool. The
// tools act in the caller's namespace; naming another is refused with
// namespace_mismatch.
type NamespaceArgs struct {
	Tenant string `json:"tenant,omitempty" jsonschema:"optional; the caller's tenant (its Kubernetes namespace). Another tenant is refused with namespace_mismatch"`
	Agent  string `json:"agent,omitempty" jsonschema:"optional; the caller's agent (its SandboxClaim name). Another agent is refused with namespace_mismatch"`
}

// RememberArgs are the arguments of the remember tool.
type RememberArgs struct {
	NamespaceArgs
	Kind string   `json:"kind" jsonschema:"what sort of memory, matching ^[a-z][a-z0-9_]{0,31}$, e.g. preference, fact, decision"`
	Key  string   `json:"key,omitempty" jsonschema:"optional subject of the memory (at most 256 bytes); a newer memory with the same kind and key supersedes the old one"`
	Text string   `json:"text" jsonschema:"the memory text, UTF-8, at most 16 KiB unless configured; never truncated"`
	Tags []string `json:"tags,omitempty" jsonschema:"optional labels, at most 16 of at most 64 bytes"`
}

// RecallArgs are the arguments of the recall tool.
type RecallArgs struct {
	NamespaceArgs
	Query   string `json:"query,omitempty" jsonschema:"keywords, any of which may match (best match first); empty lists the newest memories"`
	Kind    string `json:"kind,omitempty" jsonschema:"optional kind to restrict results to"`
	Limit   int    `json:"limit,omitempty" jsonschema:"most results to return, 1 to 100; default 10"`
	History bool   `json:"history,omitempty" jsonschema:"include superseded memories"`
}

// RecallResult is the result of the recall tool and the body of GET
// .../memories.
type RecallResult struct {
	Memories []Memory `json:"memories" jsonschema:"matching memories, best first"`
}

// ForgetArgs are the arguments of the forget tool.
type ForgetArgs struct {
	NamespaceArgs
	ID string `json:"id" jsonschema:"the id of the memory to delete"`
}

// ForgetResult is the result of the forget tool.
type ForgetResult struct {
	Forgotten string `json:"forgotten" jsonschema:"the id of the deleted memory"`
}

// StateGetArgs are the arguments of the state_get tool.
type StateGetArgs struct {
	NamespaceArgs
	Name string `json:"name" jsonschema:"the state slot, matching ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"`
}

// StateLeaseArgs are the arguments of the state_lease tool.
type StateLeaseArgs struct {
	NamespaceArgs
	Name       string `json:"name" jsonschema:"the state slot to lease"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty" jsonschema:"lease lifetime in seconds; default 300, at most 3600 unless configured"`
}

// StatePutArgs are the arguments of the state_put tool.
type StatePutArgs struct {
	NamespaceArgs
	Name    string          `json:"name" jsonschema:"the state slot to write"`
	Epoch   int64           `json:"epoch" jsonschema:"the lease epoch returned by state_lease"`
	IfMatch json.RawMessage `json:"if_match" jsonschema:"the version the state must have: a number (0 if never written) or \"*\" for any"`
	State   json.RawMessage `json:"state" jsonschema:"the new state: any JSON value"`
}

// StateReleaseArgs are the arguments of the state_release tool.
type StateReleaseArgs struct {
	NamespaceArgs
	Name  string `json:"name" jsonschema:"the state slot"`
	Epoch int64  `json:"epoch" jsonschema:"the lease epoch to release"`
}

// ReleaseResult is the result of the state_release tool.
type ReleaseResult struct {
	Released int64 `json:"released" jsonschema:"the released epoch"`
}

// MCPHandler returns an MCP server (streamable HTTP transport, stateless,
// JSON responses) for mounting at /mcp, with the tools remember, recall,
// forget, state_get, state_lease, state_put and state_release. Each takes
// the arguments above and returns the same JSON as the HTTP API (see
// [Service.Handler]); a refusal is a tool error whose text is the HTTP
// API's error body, e.g. {"error":"lease_held","message":...,"holder":...}.
//
// Every HTTP request must carry "Authorization: Bearer <key>", checked
// with verify; a refused key gets 401 and is logged at Debug by its
// SHA-256 only. Being stateless, the server keeps no MCP session that
// another identity could reuse: every request speaks only for its own key
// (TokenInfo.UserID is still set to the identity, for stateful use).
func (s *Service) MCPHandler(verify VerifyKeyFunc) http.Handler {
	server := mcptool.NewServer("custody-memory", "Memories and working state of this agent, kept outside the sandbox.", s.log,
		func(ctx context.Context, tool string, err error) []byte { return refusal(ctx, s.log, tool, err) })
	// The handlers read the arguments as the client sent them, as strictly
	// as HTTP bodies, and answer as the HTTP API does: a state is stored
	// and read as written, not as the SDK would re-encode it.
	server.StrictArgs = func(data []byte, v any) error { return decodeStrict(data, v, "of the tool's arguments") }
	server.Raw = true
	no, yes := false, true
	closed := &no
	addTool(server, &mcp.Tool{Name: "remember", Description: "Remember a text. Remembering the same kind, key and text again stores it once; " +
		"a new text with the same kind and key supersedes the old one (kept as history).",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: closed}}, s.toolRemember)
	addTool(server, &mcp.Tool{Name: "recall", Description: "Search memories by keywords, best match first (empty query: newest first).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: closed}}, s.toolRecall)
	addTool(server, &mcp.Tool{Name: "forget", Description: "Delete one memory by id.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: closed}}, s.toolForget)
	addTool(server, &mcp.Tool{Name: "state_get", Description: "Read a working-state slot: its version, value, last writer and lease.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: closed}}, s.toolStateGet)
	addTool(server, &mcp.Tool{Name: "state_lease", Description: "Acquire or renew the lease on a working-state slot; " +
		"returns the epoch to write with and the current state.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}}, s.toolStateLease)
	addTool(server, &mcp.Tool{Name: "state_put", Description: "Write a working-state slot while holding its lease, if its version matches.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: closed}}, s.toolStatePut)
	addTool(server, &mcp.Tool{Name: "state_release", Description: "Release a lease on a working-state slot.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: closed}}, s.toolStateRelease)

	return server.Handler(mcpauth.VerifyFunc(verify), int64(2*s.maxState+6*s.maxText+1<<20))
}

// addTool adds tool, served by h in the caller's namespace (or the one
// the arguments name, which h refuses if it is not the caller's).
func addTool[In, Out any](server *mcptool.Server, tool *mcp.Tool, h func(context.Context, apikey.Identity, Namespace, In) (Out, error)) {
	mcptool.Add(server, tool, func(ctx context.Context, rec apikey.Record, args In) (Out, error) {
		ns := Namespace{Tenant: rec.Identity.Tenant, Agent: rec.Identity.Agent}
		if a, ok := any(&args).(interface{ namespace() NamespaceArgs }); ok {
			n := a.namespace()
			if n.Tenant != "" {
				ns.Tenant = n.Tenant
			}
			if n.Agent != "" {
				ns.Agent = n.Agent
			}
		}
		return h(ctx, rec.Identity, ns, args)
	})
}

func (a *NamespaceArgs) namespace() NamespaceArgs { return *a }

// refusal is err as the HTTP API's error body (see errorBody).
func refusal(ctx context.Context, log *slog.Logger, tool string, err error) []byte {
	status, body := errorBody(err)
	if status >= 500 {
		log.ErrorContext(ctx, "memory tool failed", "tool", tool, "err", err)
	}
	b, _ := json.Marshal(body)
	return b
}

func (s *Service) toolRemember(ctx context.Context, caller apikey.Identity, ns Namespace, a RememberArgs) (Remembered, error) {
	return s.Remember(ctx, caller, ns, RememberRequest{Kind: a.Kind, Key: a.Key, Text: a.Text, Tags: a.Tags})
}

func (s *Service) toolRecall(ctx context.Context, caller apikey.Identity, ns Namespace, a RecallArgs) (RecallResult, error) {
	ms, err := s.Recall(ctx, caller, ns, Query{Text: a.Query, Kind: a.Kind, Limit: a.Limit, History: a.History})
	return RecallResult{Memories: ms}, err
}

func (s *Service) toolForget(ctx context.Context, caller apikey.Identity, ns Namespace, a ForgetArgs) (ForgetResult, error) {
	if err := s.Forget(ctx, caller, ns, a.ID); err != nil {
		return ForgetResult{}, err
	}
	return ForgetResult{Forgotten: a.ID}, nil
}

func (s *Service) toolStateGet(ctx context.Context, caller apikey.Identity, ns Namespace, a StateGetArgs) (State, error) {
	return s.State(ctx, caller, ns, a.Name)
}

func (s *Service) toolStateLease(ctx context.Context, caller apikey.Identity, ns Namespace, a StateLeaseArgs) (Grant, error) {
	if err := checkNamespace(caller, ns); err != nil {
		return Grant{}, err
	}
	ttl, err := s.ttlFromSeconds(a.TTLSeconds)
	if err != nil {
		return Grant{}, err
	}
	return s.Lease(ctx, caller, ns, a.Name, ttl)
}

func (s *Service) toolStatePut(ctx context.Context, caller apikey.Identity, ns Namespace, a StatePutArgs) (State, error) {
	if err := checkNamespace(caller, ns); err != nil {
		return State{}, err
	}
	version, err := parseIfMatchJSON(a.IfMatch)
	if err != nil {
		return State{}, err
	}
	return s.PutState(ctx, caller, ns, a.Name, a.Epoch, version, a.State)
}

// parseIfMatchJSON accepts a JSON number or a string that [ParseIfMatch]
// accepts; null (or nothing) is [ErrPreconditionRequired], as a PUT
// without If-Match is.
func parseIfMatchJSON(raw json.RawMessage) (int64, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return 0, ErrPreconditionRequired
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 {
			return 0, invalid("if_match must be a non-negative version or \"*\"")
		}
		return n, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, invalid("if_match must be a non-negative version or \"*\"")
	}
	return ParseIfMatch(str)
}

func (s *Service) toolStateRelease(ctx context.Context, caller apikey.Identity, ns Namespace, a StateReleaseArgs) (ReleaseResult, error) {
	if err := s.Release(ctx, caller, ns, a.Name, a.Epoch); err != nil {
		return ReleaseResult{}, err
	}
	return ReleaseResult{Released: a.Epoch}, nil
}
