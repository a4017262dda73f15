package memory_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

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
