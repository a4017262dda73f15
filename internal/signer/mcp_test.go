package signer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcptool/mcptooltest"
	"github.com/agentcustody/custody/internal/signer"
)

// mcpServer serves e's signer MCP handler with a fake verifier: the key
// is "tenant/agent/session".
func mcpServer(t *testing.T, e *env) *httptest.Server {
	t.Helper()
	verify := func(_ context.Context, key string) (apikey.Record, error) {
		parts := strings.Split(key, "/")
		if len(parts) != 3 {
			return apikey.Record{}, fmt.Errorf("%w: unknown key", apikey.ErrUnauthenticated)
		}
		return apikey.Record{Identity: apikey.Identity{Tenant: parts[0], Agent: parts[1], Session: parts[2], Method: "kubernetes"},
			ExpiresAt: time.Now().Add(time.Hour)}, nil
	}
	srv := httptest.NewServer(e.s.MCPHandler(verify))
	t.Cleanup(srv.Close)
	return srv
}

func mcpConnect(ctx context.Context, srv *httptest.Server, key string) (*mcp.ClientSession, error) {
	return mcptooltest.Connect(ctx, srv.URL, srv.Client(), key)
}

// mcpCall calls tool with args; see mcptooltest.Call.
func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) string {
	t.Helper()
	return mcptooltest.Call(t, cs, tool, args, out)
}

func mcpErrorCode(t *testing.T, text string) string {
	t.Helper()
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(text), &body); err != nil || body.Message == "" {
		t.Fatalf("tool error %q is not a JSON error body: %v", text, err)
	}
	return body.Error
}

func TestMCPTools(t *testing.T) {
	e := newEnv(t, nil)
	srv := mcpServer(t, e)
	ctx := context.Background()
	cs, err := mcpConnect(ctx, srv, agentTok)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools() = %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"signer_close_run", "signer_complete", "signer_consume_approval", "signer_decide", "signer_model_event",
		"signer_register_run", "signer_request_approval", "signer_status", "signer_wait_approval"}
	if !slices.Equal(names, want) {
		t.Errorf("ListTools() = %v, want %v", names, want)
	}

	var info signer.RunInfo
	if msg := mcpCall(t, cs, "signer_register_run", nil, &info); msg != "" || info.Run == "" || info.Agent != "support-agent" || info.Session != "pod-1" {
		t.Fatalf("signer_register_run = %+v %s", info, msg)
	}
	run := info.Run

	var d signer.DecideResponse
	if msg := mcpCall(t, cs, "signer_decide", map[string]any{"run": run, "call_id": "c1", "tool": "Bash", "args": map[string]any{"command": "ls"}}, &d); msg != "" ||
		d.Effect != "allow" || !slices.Contains(d.RuleIDs, "AGENTS-001") {
		t.Errorf("signer_decide(Bash) = %+v %s, want allow by AGENTS-001", d, msg)
	}
	if msg := mcpCall(t, cs, "signer_decide", map[string]any{"run": run, "call_id": "c2", "tool": "WebFetch", "args": map[string]any{"url": "http://169.254.169.254/"}}, &d); msg != "" ||
		d.Effect != "deny" || !slices.Contains(d.RuleIDs, "CUSTODY-NET-METADATA") {
		t.Errorf("signer_decide(WebFetch metadata) = %+v %s, want deny by CUSTODY-NET-METADATA", d, msg)
	}
	var ap signer.Appended
	if msg := mcpCall(t, cs, "signer_complete", map[string]any{"run": run, "call_id": "c1", "outcome": "ok"}, &ap); msg != "" || ap.Index == 0 {
		t.Errorf("signer_complete = %+v %s", ap, msg)
	}
	if msg := mcpCall(t, cs, "signer_model_event", map[string]any{"run": run, "event": "response", "model": "m", "input_tokens": 3}, &ap); msg != "" {
		t.Errorf("signer_model_event = %s", msg)
	}

	// Ask, approve (admin HTTP), wait, consume.
	if msg := mcpCall(t, cs, "signer_decide", map[string]any{"run": run, "call_id": "c3", "tool": "Deploy", "args": map[string]any{"env": "prod"}}, &d); msg != "" || d.Effect != "ask" {
		t.Fatalf("signer_decide(Deploy) = %+v %s, want ask", d, msg)
	}
	var a signer.ApprovalInfo
	if msg := mcpCall(t, cs, "signer_request_approval", map[string]any{"run": run, "call_id": "c3", "tool": "Deploy", "args": map[string]any{"env": "prod"}}, &a); msg != "" || a.State != "pending" {
		t.Fatalf("signer_request_approval = %+v %s, want pending", a, msg)
	}
	if _, err := e.s.ResolveApproval(ctx, a.ID, true); err != nil {
		t.Fatalf("ResolveApproval = %v", err)
	}
	var w signer.ApprovalInfo
	if msg := mcpCall(t, cs, "signer_wait_approval", map[string]any{"run": run, "approval_id": a.ID, "wait_seconds": 1}, &w); msg != "" || w.State != "approved" {
		t.Errorf("signer_wait_approval = %+v %s, want approved", w, msg)
	}
	if msg := mcpCall(t, cs, "signer_consume_approval", map[string]any{"run": run, "approval_id": a.ID, "args": map[string]any{"env": "prod"}}, &w); msg != "" || w.State != "consumed" {
		t.Errorf("signer_consume_approval = %+v %s, want consumed", w, msg)
	}

	// Another identity cannot act in the run.
	other, err := mcpConnect(ctx, srv, "agents/other-agent/pod-9")
	if err != nil {
		t.Fatalf("Connect(other) = %v", err)
	}
	defer other.Close()
	if msg := mcpCall(t, other, "signer_decide", map[string]any{"run": run, "call_id": "x1", "tool": "Bash", "args": map[string]any{}}, nil); msg == "" || mcpErrorCode(t, msg) != "forbidden" {
		t.Errorf("signer_decide by another agent = %q, want forbidden", msg)
	}
	if msg := mcpCall(t, other, "signer_status", map[string]any{"run": run}, nil); msg == "" || mcpErrorCode(t, msg) != "forbidden" {
		t.Errorf("signer_status by another agent = %q, want forbidden", msg)
	}

	refusals := []struct {
		name string
		tool string
		args map[string]any
		code string
	}{
		{"duplicate call", "signer_decide", map[string]any{"run": run, "call_id": "c1", "tool": "Bash", "args": map[string]any{}}, "duplicate_call"},
		{"unknown run", "signer_status", map[string]any{"run": "nope"}, "not_found"},
		{"unknown call", "signer_complete", map[string]any{"run": run, "call_id": "zz", "outcome": "ok"}, "not_found"},
		{"consumed twice", "signer_consume_approval", map[string]any{"run": run, "approval_id": a.ID, "args": map[string]any{"env": "prod"}}, "approval_consumed"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			msg := mcpCall(t, cs, tt.tool, tt.args, nil)
			if msg == "" {
				t.Fatalf("%s(%v) succeeded, want %s", tt.tool, tt.args, tt.code)
			}
			if got := mcpErrorCode(t, msg); got != tt.code {
				t.Errorf("%s(%v) error = %q, want %q", tt.tool, tt.args, got, tt.code)
			}
		})
	}
	// wait_seconds over 60 is refused by the schema or the handler.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "signer_wait_approval", Arguments: map[string]any{"run": run, "approval_id": a.ID, "wait_seconds": 61}})
	if err == nil && !res.IsError {
		t.Errorf("signer_wait_approval(wait_seconds 61) succeeded, want a refusal")
	}

	if msg := mcpCall(t, cs, "signer_close_run", map[string]any{"run": run}, &ap); msg != "" {
		t.Fatalf("signer_close_run = %s", msg)
	}
	if msg := mcpCall(t, cs, "signer_status", map[string]any{"run": run}, &info); msg != "" || !info.Closed {
		t.Errorf("signer_status after close = %+v %s, want closed", info, msg)
	}
	if msg := mcpCall(t, cs, "signer_decide", map[string]any{"run": run, "call_id": "c9", "tool": "Bash", "args": map[string]any{}}, nil); msg == "" || mcpErrorCode(t, msg) != "run_closed" {
		t.Errorf("signer_decide after close = %q, want run_closed", msg)
	}
}

func TestMCPUnauthenticated(t *testing.T) {
	e := newEnv(t, nil)
	srv := mcpServer(t, e)
	// A signer that never logged a record fails its closing checkpoint.
	if _, err := e.s.Register(context.Background(), apikey.Identity{Tenant: "agents", Agent: "support-agent", Session: "pod-1"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, key string }{{"no key", ""}, {"unknown key", "not-a-key"}} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST with %s = %d, want 401", tt.name, resp.StatusCode)
			}
			if cs, err := mcpConnect(context.Background(), srv, tt.key); err == nil {
				cs.Close()
				t.Errorf("Connect() with %s succeeded, want an error", tt.name)
			}
		})
	}
}
