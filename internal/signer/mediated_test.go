package signer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/verify"
)

// TestAgentAPIRefusesProxyCallIDs: a call custody's MCP or egress proxy
// decided is recorded by custody only. Before, the sandbox's own key
// could append call.completed to it through the agent API (a refusal
// names its call_id), so a call the proxy denied and never forwarded read
// "completed ok" with a result the agent chose. The agent API (HTTP and
// the signer MCP tools) refuses the proxies' call ids in decide,
// complete and approvals; the proxies' in-process calls still work.
func TestAgentAPIRefusesProxyCallIDs(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	run := e.register(agentTok)
	proxyID := signer.MCPProxyCallPrefix + "0123456789abcdef"
	d, err := e.s.Decide(ctx, identity(), run, signer.DecideRequest{CallID: proxyID, Tool: "WebFetch", Args: json.RawMessage(`{"url":"http://169.254.169.254/"}`)})
	if err != nil || d.Effect != "deny" {
		t.Fatalf("the proxy's Decide = %+v, %v; want deny", d, err)
	}
	egressID := signer.EgressCallPrefix + "0123456789abcdef"
	if _, err := e.s.Decide(ctx, identity(), run, signer.DecideRequest{CallID: egressID, Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`)}); err != nil {
		t.Fatalf("the egress proxy's Decide: %v", err)
	}

	for _, id := range []string{proxyID, egressID, signer.MCPProxyCallPrefix, signer.EgressCallPrefix + "new"} {
		var out map[string]any
		if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/complete", map[string]any{"call_id": id, "outcome": "ok"}, &out); st != 400 {
			t.Errorf("agent complete %s = %d %v, want 400", id, st, out)
		}
		if _, st := e.decide(agentTok, run, id, "Bash", `{"command":"ls"}`); st != 400 {
			t.Errorf("agent decide %s = %d, want 400", id, st)
		}
		if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/approvals", map[string]any{"call_id": id, "tool": "Bash", "args": map[string]any{"command": "ls"}}, nil); st != 400 {
			t.Errorf("agent approval %s = %d, want 400", id, st)
		}
	}

	srv := mcpServer(t, e)
	cs, err := mcpConnect(ctx, srv, agentTok)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var ap signer.Appended
	if msg := mcpCall(t, cs, "signer_complete", map[string]any{"run": run, "call_id": proxyID, "outcome": "ok"}, &ap); mcpErrorCode(t, msg) != "bad_request" {
		t.Errorf("signer_complete %s = %q, want bad_request", proxyID, msg)
	}
	var dr signer.DecideResponse
	if msg := mcpCall(t, cs, "signer_decide", map[string]any{"run": run, "call_id": egressID + "2", "tool": "Bash", "args": map[string]any{"command": "ls"}}, &dr); mcpErrorCode(t, msg) != "bad_request" {
		t.Errorf("signer_decide egress id = %q, want bad_request", msg)
	}

	// The agent's own ids, and the proxies' completions, still work.
	if _, st := e.decide(agentTok, run, "c1", "Bash", `{"command":"ls"}`); st != 200 {
		t.Fatalf("agent decide c1 = %d", st)
	}
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/complete", map[string]any{"call_id": "c1", "outcome": "ok"}, nil); st != 200 {
		t.Fatalf("agent complete c1 = %d", st)
	}
	if _, err := e.s.Complete(ctx, identity(), run, signer.CompleteRequest{CallID: egressID, Outcome: "connected:127.0.0.1:80"}); err != nil {
		t.Fatalf("the egress proxy's Complete: %v", err)
	}
	var completed []string
	leaves, err := e.db.RunLeaves(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves {
		r, err := verify.ParseRecord(l.Record)
		if err != nil {
			t.Fatal(err)
		}
		if r.Type == verify.TypeCallCompleted {
			id, _ := r.Body["call_id"].(string)
			completed = append(completed, id)
		}
	}
	if strings.Join(completed, ",") != "c1,"+egressID {
		t.Errorf("completed calls %v, want c1 and %s", completed, egressID)
	}
}
