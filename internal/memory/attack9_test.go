package memory_test

import (
	"context"
	"encoding/json"

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
