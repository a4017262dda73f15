package memory_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/memory"
)

// TestAttack9MCPStatePutKeepsTheValue: a state written with the state_put
// tool is stored as the client sent it, as over HTTP. The MCP SDK checks
// the arguments by decoding them into map[string]any and encoding them
// again, which turned every number into a float64 (12345678901234567890
// became 12345678901234567000), sorted members and dropped duplicates.
func TestAttack9MCPStatePutKeepsTheValue(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	cs, err := e.connect(ctx, e.key("agents", "run-1", "pod-a"))
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	var g memory.Grant
	if msg := call(t, cs, "state_lease", map[string]any{"name": "plan"}, &g); msg != "" {
		t.Fatalf("state_lease: %s", msg)
	}
	const value = `{"n":12345678901234567890,"z":[1.0,2e3,-0],"a":"x"}`
	if msg := call(t, cs, "state_put", map[string]any{"name": "plan", "epoch": g.Epoch, "if_match": 0, "state": json.RawMessage(value)}, nil); msg != "" {
		t.Fatalf("state_put: %s", msg)
	}
	st, err := e.db.GetWorkingState(ctx, memory.Namespace{Tenant: "agents", Agent: "run-1"}, "plan")
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Value) != value {
		t.Errorf("stored state %s, want %s as sent", st.Value, value)
	}
}

// TestAttack9UnpairedSurrogateRefused: a text, key or tag with an
// unpaired surrogate escape (\ud800) was stored with U+FFFD in its place
// (encoding/json replaces it silently), over HTTP and MCP alike: a text
// other than the one sent, and two different keys that supersede each
// other. It must be refused with a clear error and nothing stored.
func TestAttack9UnpairedSurrogateRefused(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	for _, body := range []string{
		`{"kind":"fact","text":"a\ud800b"}`,
		`{"kind":"fact","key":"\udfff","text":"x"}`,
		`{"kind":"fact","text":"y","tags":["\ud83d"]}`,
		`{"kind":"fact","text":"\ude00\ud83d"}`,
	} {
		r := e.do("POST", base+"/memories", key, body)
		if r.status != http.StatusBadRequest || r.str("error") != "bad_request" {
			t.Errorf("POST %s = %d %s, want 400 bad_request", body, r.status, r.raw)
		}
	}
	cs, err := e.connect(context.Background(), key)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	msg := call(t, cs, "remember", map[string]any{"kind": "fact", "text": json.RawMessage(`"c\ud800d"`)}, nil)
	if msg == "" || errorCode(t, msg) != "bad_request" {
		t.Errorf("remember(c\\ud800d) = %q, want bad_request", msg)
	}
	if ms := e.memories("agents", "run-1"); len(ms) != 0 {
		t.Errorf("stored %+v, want nothing", ms)
	}
	// A surrogate pair is one character, kept.
	if r := e.do("POST", base+"/memories", key, `{"kind":"fact","text":"\ud83d\ude00"}`); r.status != http.StatusCreated {
		t.Errorf("POST pair = %d %s, want 201", r.status, r.raw)
	}
}

// TestAttack9MCPStateReadsTheValue: a state read with state_get,
// state_lease or state_put is the stored value, as over HTTP. The MCP SDK
// checks a tool's result against its output schema by decoding it into
// map[string]any and encoding it again, which turned 12345678901234567890
// into 12345678901234567000: an agent resuming over MCP read another
// state than the one written. (The text content is checked: the Go
// client decodes structured content into float64s itself.)
func TestAttack9MCPStateReadsTheValue(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	key := e.key("agents", "run-1", "pod-a")
	const value = `{"n":12345678901234567890,"z":[1.0,2e3],"a":"x"}`
	if r := e.do("POST", base+"/state/plan/lease", key, ""); r.status != 200 {
		t.Fatalf("lease = %d %s", r.status, r.raw)
	}
	if r := e.do("PUT", base+"/state/plan", key, value, "Lease-Epoch: 1", "If-Match: 0"); r.status != 200 {
		t.Fatalf("put = %d %s", r.status, r.raw)
	}
	cs, err := e.connect(ctx, key)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"state_get", map[string]any{"name": "plan"}},
		{"state_lease", map[string]any{"name": "plan"}},
		{"state_put", map[string]any{"name": "plan", "epoch": 1, "if_match": "*", "state": json.RawMessage(value)}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tc.tool, err, res)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		var out struct {
			State json.RawMessage `json:"state"`
		}
		if err := json.Unmarshal([]byte(text), &out); err != nil || string(out.State) != value {
			t.Errorf("%s result %s, want state %s", tc.tool, text, value)
		}
	}
}
