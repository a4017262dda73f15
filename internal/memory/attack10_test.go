package memory_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/memory"
)

// TestAttack10StateValuesAgree: HTTP PUT and the state_put tool accept
// the same state values. HTTP checked a value with encoding/json's
// json.Valid only, so it stored what state_put refuses and what other
// readers cannot read as written: invalid UTF-8 (state_get sent U+FFFD
// in its place; the Python SDK's decode fails), an unpaired surrogate
// escape, a member named twice (readers take the first or the last),
// 1e400 (the MCP SDKs read numbers as doubles: state_put refused it and a
// Go MCP client could not read state_get or state_lease), and nesting
// 9999 deep (state_lease over MCP granted the lease, then its result
// could not be sent or read).
func TestAttack10StateValuesAgree(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	key := e.key("agents", "run-1", "pod-a")
	if r := e.do("POST", base+"/state/plan/lease", key, ""); r.status != 200 {
		t.Fatalf("lease = %d %s", r.status, r.raw)
	}
	cs, err := e.connect(ctx, key)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, value string
		ok          bool
		// noMCP: the Go MCP client cannot send it (nor read a result
		// carrying it).
		noMCP bool
	}{
		{"duplicate member", `{"a":1,"a":2}`, false, false},
		{"nested duplicate member", `[{"b":{"a":1,"a":2}}]`, false, false},
		{"unpaired surrogate", `"\ud800"`, false, false},
		{"invalid UTF-8", "\"\xff\"", false, false},
		{"number over float64", `1e400`, false, true},
		{"negative number over float64", `[-2e308]`, false, true},
		{"nested 101", nest(101), false, false},
		{"nested 9999", nest(9999), false, true},
		{"nested 100", nest(100), true, false},
		{"precision beyond float64", `12345678901234567890.12345678901234567890`, true, false},
		{"largest float64", `1.7976931348623157e308`, true, false},
		{"underflow", `1e-400`, true, false},
		{"surrogate pair", `"\ud83d\ude00"`, true, false},
		{"NUL escape", `{"a":"\u0000"}`, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("PUT", base+"/state/plan", key, tc.value, "Lease-Epoch: 1", "If-Match: *")
			if tc.ok && r.status != http.StatusOK || !tc.ok && (r.status != http.StatusBadRequest || r.str("error") != "bad_request") {
				t.Errorf("PUT %.40q = %d %.200s, want ok %v (400 bad_request if not)", tc.value, r.status, r.raw, tc.ok)
			}
			if tc.noMCP {
				return
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "state_put",
				Arguments: json.RawMessage(`{"name":"plan","epoch":1,"if_match":"*","state":` + tc.value + `}`)})
			if err != nil {
				t.Fatalf("state_put: %v", err)
			}
			if res.IsError == tc.ok {
				t.Errorf("state_put(%.40q) IsError = %v, want %v", tc.value, res.IsError, !tc.ok)
			}
		})
	}
}

// TestAttack10MCPIfMatchNullRequired: state_put with "if_match": null is
// refused as HTTP refuses a PUT without If-Match (precondition_required).
// json.Unmarshal of null into an int64 leaves it 0 without an error, so
// null was read as version 0: a write with no precondition stated was
// taken as "never written" and stored.
func TestAttack10MCPIfMatchNullRequired(t *testing.T) {
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
	msg := call(t, cs, "state_put", map[string]any{"name": "plan", "epoch": g.Epoch, "if_match": nil, "state": 1}, nil)
	if msg == "" || errorCode(t, msg) != "precondition_required" {
		t.Errorf("state_put(if_match null) = %q, want precondition_required", msg)
	}
	if st, err := e.db.GetWorkingState(ctx, memory.Namespace{Tenant: "agents", Agent: "run-1"}, "plan"); err != nil || st.Version != 0 {
		t.Errorf("after state_put(if_match null): %+v, %v, want version 0", st, err)
	}
}
