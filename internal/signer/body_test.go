package signer_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/signer"
)

// TestStrictBodies: every request body that becomes a record is read as
// strictly as a bundle (issue 8: decide took the last of duplicate "args"
// and "tool", matched "TOOL" to "tool" and ignored unknown members). A
// refused body answers 400 bad_request naming the problem, and nothing is
// decided or recorded.
func TestStrictBodies(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	if _, st := e.decide(agentTok, run, "c1", "Deploy", `{"env":"prod"}`); st != 200 {
		t.Fatalf("decide = %d", st)
	}
	var ap struct {
		ID string `json:"approval_id"`
	}
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/approvals",
		map[string]any{"call_id": "c1", "tool": "Deploy", "args": map[string]any{"env": "prod"}}, &ap); st != 201 {
		t.Fatalf("request approval = %d", st)
	}
	r := "/v1/signer/runs/" + run
	tests := []struct {
		name, path, body, want string
	}{
		{"decide duplicate args", r + "/decide", `{"call_id":"c2","tool":"Bash","args":{"command":"rm -rf /"},"args":{"command":"ls"}}`, `duplicate object member name: "args"`},
		{"decide duplicate tool", r + "/decide", `{"call_id":"c2","tool":"Deploy","tool":"Bash","args":{}}`, `duplicate object member name: "tool"`},
		{"decide case-folded tool", r + "/decide", `{"call_id":"c2","TOOL":"Bash","args":{}}`, `unknown object member "TOOL"`},
		{"decide case-folded args", r + "/decide", `{"call_id":"c2","tool":"Bash","Args":{"command":"ls"}}`, `unknown object member "Args"`},
		{"decide unknown member", r + "/decide", `{"call_id":"c2","tool":"Bash","args":{},"effect":"allow"}`, `unknown object member "effect"`},
		{"decide duplicate inside args", r + "/decide", `{"call_id":"c2","tool":"Bash","args":{"command":"ls","command":"rm"}}`, `duplicate object member name: "command"`},
		{"decide trailing data", r + "/decide", `{"call_id":"c2","tool":"Bash"} {"call_id":"c3"}`, `trailing data`},
		{"decide lone surrogate", r + "/decide", `{"call_id":"c2","tool":"Bash\ud800"}`, `lone surrogate`},
		{"complete duplicate outcome", r + "/complete", `{"call_id":"c1","outcome":"error","outcome":"ok"}`, `duplicate object member name: "outcome"`},
		{"complete case-folded", r + "/complete", `{"Call_ID":"c1","outcome":"ok"}`, `unknown object member "Call_ID"`},
		{"model event unknown", r + "/model-events", `{"event":"response","cost_usd":1}`, `unknown object member "cost_usd"`},
		{"model event duplicate", r + "/model-events", `{"event":"response","input_tokens":1,"input_tokens":100}`, `duplicate object member name: "input_tokens"`},
		{"approval duplicate args", r + "/approvals", `{"call_id":"c1","tool":"Deploy","args":{"env":"dev"},"args":{"env":"prod"}}`, `duplicate object member name: "args"`},
		{"consume case-folded args", r + "/approvals/" + ap.ID + "/consume", `{"ARGS":{"env":"prod"}}`, `unknown object member "ARGS"`},
		{"close unknown member", r + "/close", `{"reason":"idle_timeout"}`, `unknown object member "reason"`},
		{"register unknown member", "/v1/signer/runs", `{"tenant":"other"}`, `unknown object member "tenant"`},
		{"register not an object", "/v1/signer/runs", `[]`, `body`},
	}
	before := e.treeSize()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.api.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+agentTok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var eb struct{ Error, Message string }
			json.Unmarshal(data, &eb)
			if resp.StatusCode != 400 || eb.Error != "bad_request" || !strings.Contains(eb.Message, tt.want) {
				t.Errorf("POST %s %s = %d %s, want 400 bad_request naming %q", tt.path, tt.body, resp.StatusCode, data, tt.want)
			}
		})
	}
	if after := e.treeSize(); after != before {
		t.Errorf("refused bodies were recorded: %d records, want %d", after, before)
	}
	// Whitespace, member order and an empty body (register, close) are fine.
	if st := e.call(e.api, agentTok, "POST", r+"/complete", json.RawMessage(` { "outcome" : "ok" , "call_id" : "c1" } `), nil); st != 200 {
		t.Errorf("complete with whitespace = %d", st)
	}
	if st := e.call(e.api, agentTok, "POST", r+"/close", nil, nil); st != 200 {
		t.Errorf("close without a body = %d", st)
	}
}

// treeSize is the number of records in the log.
func (e *env) treeSize() int64 {
	e.t.Helper()
	n, err := e.db.TreeSize(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestStrictMCPArguments: the MCP tools that record read their arguments
// as strictly as the HTTP bodies (the SDK's schema check lets the last of
// duplicate members win).
func TestStrictMCPArguments(t *testing.T) {
	e := newEnv(t, nil)
	srv := mcpServer(t, e)
	ctx := context.Background()
	cs, err := mcpConnect(ctx, srv, agentTok)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	run := e.register(agentTok)
	before := e.treeSize()
	for _, tt := range []struct{ tool, args, want string }{
		{"signer_decide", `{"run":"` + run + `","call_id":"c1","tool":"Bash","args":{"command":"rm -rf /"},"args":{"command":"ls"}}`, `duplicate object member name: "args"`},
		{"signer_decide", `{"run":"` + run + `","call_id":"c1","tool":"Deploy","tool":"Bash"}`, `duplicate object member name: "tool"`},
		{"signer_complete", `{"run":"` + run + `","call_id":"c1","outcome":"error","outcome":"ok"}`, `duplicate object member name: "outcome"`},
		{"signer_close_run", `{"run":"other","run":"` + run + `"}`, `duplicate object member name: "run"`},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: json.RawMessage(tt.args)})
		if err != nil {
			t.Fatalf("CallTool(%s) = %v", tt.tool, err)
		}
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		var body struct{ Error, Message string }
		json.Unmarshal([]byte(text), &body)
		if !res.IsError || body.Error != "bad_request" || !strings.Contains(body.Message, tt.want) {
			t.Errorf("%s %s = error %v %s, want bad_request naming %q", tt.tool, tt.args, res.IsError, text, tt.want)
		}
	}
	if after := e.treeSize(); after != before {
		t.Errorf("refused tool calls were recorded: %d records, want %d", after, before)
	}
	var d signer.DecideResponse
	if text := mcpCall(t, cs, "signer_decide", map[string]any{"run": run, "call_id": "c1", "tool": "Bash", "args": map[string]any{"command": "ls"}}, &d); text != "" || d.Effect != "allow" {
		t.Errorf("signer_decide = %s %+v, want allow", text, d)
	}
}
