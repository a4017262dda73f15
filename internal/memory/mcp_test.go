package memory_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/mcptool/mcptooltest"
	"github.com/agentcustody/custody/internal/memory"
)

// connect opens an MCP client session to e's /mcp with key.
func (e *env) connect(ctx context.Context, key string) (*mcp.ClientSession, error) {
	return mcptooltest.Connect(ctx, e.srv.URL+"/mcp", e.srv.Client(), key)
}

// call calls tool with args; see mcptooltest.Call.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) string {
	t.Helper()
	return mcptooltest.Call(t, cs, tool, args, out)
}

// errorCode is the "error" of a tool error text.
func errorCode(t *testing.T, text string) string {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &body); err != nil {
		t.Fatalf("tool error %q is not a JSON error body: %v", text, err)
	}
	return body.Error
}

func TestMCPTools(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	cs, err := e.connect(ctx, e.key("agents", "run-1", "pod-a"))
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
	want := []string{"forget", "recall", "remember", "state_get", "state_lease", "state_put", "state_release"}
	if !slices.Equal(names, want) {
		t.Errorf("ListTools() = %v, want %v", names, want)
	}

	var rem memory.Remembered
	if msg := call(t, cs, "remember", map[string]any{"kind": "preference", "key": "greeting", "text": "你好世界 🎉"}, &rem); msg != "" || rem.Status != memory.StatusCreated {
		t.Fatalf("remember = %+v %s, want created", rem, msg)
	}
	var again memory.Remembered
	if msg := call(t, cs, "remember", map[string]any{"kind": "preference", "key": "greeting", "text": "你好世界 🎉"}, &again); msg != "" || again.Status != memory.StatusUnchanged || again.ID != rem.ID {
		t.Errorf("remember again = %+v %s, want unchanged %s", again, msg, rem.ID)
	}
	var rec memory.RecallResult
	if msg := call(t, cs, "recall", map[string]any{"query": "世界"}, &rec); msg != "" || len(rec.Memories) != 1 || rec.Memories[0].Text != "你好世界 🎉" || rec.Memories[0].Session != "pod-a" {
		t.Errorf("recall(世界) = %+v %s, want the greeting byte for byte", rec, msg)
	}

	var g memory.Grant
	if msg := call(t, cs, "state_lease", map[string]any{"name": "plan", "ttl_seconds": 60}, &g); msg != "" || g.Epoch != 1 || g.Version != 0 {
		t.Fatalf("state_lease = %+v %s, want epoch 1 at version 0", g, msg)
	}
	var st memory.State
	if msg := call(t, cs, "state_put", map[string]any{"name": "plan", "epoch": g.Epoch, "if_match": 0, "state": map[string]any{"step": 1}}, &st); msg != "" || st.Version != 1 {
		t.Fatalf("state_put = %+v %s, want version 1", st, msg)
	}
	if msg := call(t, cs, "state_put", map[string]any{"name": "plan", "epoch": g.Epoch, "if_match": "\"1\"", "state": "text state"}, &st); msg != "" || st.Version != 2 {
		t.Fatalf("state_put(if_match \"1\") = %+v %s, want version 2", st, msg)
	}
	var got memory.State
	if msg := call(t, cs, "state_get", map[string]any{"name": "plan"}, &got); msg != "" || got.Version != 2 || string(got.Value) != `"text state"` || got.Lease == nil || got.Lease.Holder != "pod-a" {
		t.Errorf("state_get = %+v %s, want version 2 with lease by pod-a", got, msg)
	}

	refusals := []struct {
		name string
		tool string
		args map[string]any
		code string
	}{
		{"another tenant", "recall", map[string]any{"tenant": "other"}, "namespace_mismatch"},
		{"another agent", "remember", map[string]any{"agent": "run-2", "kind": "fact", "text": "x"}, "namespace_mismatch"},
		{"another agent's state", "state_get", map[string]any{"agent": "run-2", "name": "plan"}, "namespace_mismatch"},
		{"stale version", "state_put", map[string]any{"name": "plan", "epoch": 1, "if_match": 1, "state": 1}, "version_conflict"},
		{"wrong epoch", "state_put", map[string]any{"name": "plan", "epoch": 5, "if_match": "*", "state": 1}, "lease_lost"},
		{"unknown memory", "forget", map[string]any{"id": "0000000000000001"}, "not_found"},
		{"bad kind", "remember", map[string]any{"kind": "BAD", "text": "x"}, "bad_request"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			msg := call(t, cs, tt.tool, tt.args, nil)
			if msg == "" {
				t.Fatalf("%s(%v) succeeded, want %s", tt.tool, tt.args, tt.code)
			}
			if got := errorCode(t, msg); got != tt.code {
				t.Errorf("%s(%v) error = %q, want %q", tt.tool, tt.args, got, tt.code)
			}
		})
	}

	// Another session of the same agent sees the lease held.
	other, err := e.connect(ctx, e.key("agents", "run-1", "pod-b"))
	if err != nil {
		t.Fatalf("Connect(pod-b) = %v", err)
	}
	defer other.Close()
	msg := call(t, other, "state_lease", map[string]any{"name": "plan"}, nil)
	if msg == "" || errorCode(t, msg) != "lease_held" || !strings.Contains(msg, `"holder":"pod-a"`) {
		t.Errorf("state_lease(pod-b) = %q, want lease_held by pod-a", msg)
	}

	var rel memory.ReleaseResult
	if msg := call(t, cs, "state_release", map[string]any{"name": "plan", "epoch": 1}, &rel); msg != "" || rel.Released != 1 {
		t.Errorf("state_release = %+v %s, want released 1", rel, msg)
	}
	var fg memory.ForgetResult
	if msg := call(t, cs, "forget", map[string]any{"id": rem.ID}, &fg); msg != "" || fg.Forgotten != rem.ID {
		t.Errorf("forget = %+v %s, want %s", fg, msg, rem.ID)
	}
}

func TestMCPUnauthenticated(t *testing.T) {
	e := newEnv(t, memory.Options{})
	tests := []struct{ name, key string }{
		{"no key", ""},
		{"unknown key", "ck_" + strings.Repeat("A", 43)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST /mcp with %s = %d, want 401", tt.name, resp.StatusCode)
			}
			cs, err := e.connect(context.Background(), tt.key)
			if err == nil {
				cs.Close()
				t.Errorf("Connect() with %s succeeded, want an error", tt.name)
			}
		})
	}
}
