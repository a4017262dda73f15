package mcpproxy_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/mcpproxy"
	"github.com/agentcustody/custody/verify"
)

// refusalBody parses an error result's apierror JSON text.
func refusalBody(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	if !r.IsError {
		t.Fatalf("result %q is not an error", resultText(r))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(resultText(r)), &m); err != nil {
		t.Fatalf("error text %q is not JSON: %v", resultText(r), err)
	}
	return m
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", tool, err)
	}
	return r
}

// byCall returns the records of run about call_id, by type.
func byCall(recs []*verify.Record, callID string) map[string]*verify.Record {
	out := map[string]*verify.Record{}
	for _, r := range recs {
		if r.Body["call_id"] == callID {
			out[r.Type] = r
		}
	}
	return out
}

// lastDecided is the call_id of the last call.decided of tool in recs.
func lastDecided(recs []*verify.Record, tool string) string {
	id := ""
	for _, r := range recs {
		if r.Type == verify.TypeCallDecided && r.Body["tool"] == tool {
			id, _ = r.Body["call_id"].(string)
		}
	}
	return id
}

func TestAllowedCallForwardedAndRecorded(t *testing.T) {
	e := newEnv(t, nil)
	cs, run := e.mustConnect(e.key, "")
	if run == "" {
		t.Fatal("initialize response has no Custody-Run header")
	}
	r := call(t, cs, "echo", map[string]any{"text": "hello"})
	if r.IsError || resultText(r) != "echo: hello" {
		t.Fatalf("echo = %q (isError %v), want the upstream's result", resultText(r), r.IsError)
	}
	if got := e.up.callLog(); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("upstream calls = %v, want [echo]", got)
	}
	recs := e.records(run)
	if recs[0].Type != verify.TypeRunRegistered {
		t.Errorf("first record = %s, want run.registered", recs[0].Type)
	}
	id := lastDecided(recs, "mcp__up__echo")
	c := byCall(recs, id)
	d, done := c[verify.TypeCallDecided], c[verify.TypeCallCompleted]
	if d == nil || d.Body["effect"] != "allow" || done == nil || done.Body["outcome"] != "ok" {
		t.Fatalf("records of %s = %v, want decided allow and completed ok", id, c)
	}
	commit, _ := done.Body["result_commitment"].(string)
	if commit == "" {
		t.Fatalf("call.completed %v has no result_commitment", done.Body)
	}
	raw, _ := json.Marshal(r)
	salt, err := e.s.RevealSalt(e.ctx, done.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.VerifyArgsReveal(commit, salt, raw); err != nil {
		t.Errorf("result_commitment does not open to the result the client got: %v", err)
	}
	// The upstream saw the injected credential and never a custody key.
	for _, a := range e.up.authLog() {
		if a != "Bearer "+e.up.secret {
			t.Errorf("upstream saw Authorization %.20q..., want only the configured credential", a)
		}
	}
	// The session's end closes the run it registered.
	cs.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := e.s.Status(e.ctx, e.agent, run)
		if err == nil && info.Closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still open after the session ended: %+v, %v", run, info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDeniedCallNeverForwarded(t *testing.T) {
	e := newEnv(t, nil)
	cs, run := e.mustConnect(e.key, "")
	for _, tc := range []struct {
		tool  string
		args  any
		rules []string
	}{
		{"echo", map[string]any{"text": "secret"}, []string{"AGENTS-MCP", "AGENTS-SECRET"}},
		{"forbidden_tool", map[string]any{}, []string{"AGENTS-MCP", "AGENTS-NOFORBID"}},
		{"echo", map[string]any{"text": "http://169.254.169.254/latest/meta-data/"}, nil},
	} {
		r := call(t, cs, tc.tool, tc.args)
		m := refusalBody(t, r)
		if m["error"] != "denied" {
			t.Errorf("%s: error %v, want denied", tc.tool, m)
		}
		for _, id := range tc.rules {
			if !strings.Contains(resultText(r), id) {
				t.Errorf("%s: refusal %q does not name rule %s", tc.tool, resultText(r), id)
			}
		}
	}
	if got := e.up.callLog(); len(got) != 0 {
		t.Errorf("upstream calls = %v, want none", got)
	}
	var denied int
	for _, r := range e.records(run) {
		if r.Type == verify.TypeCallDecided && r.Body["effect"] == "deny" {
			denied++
		}
		if r.Type == verify.TypeCallCompleted {
			t.Errorf("a denied call was completed: %v", r.Body)
		}
	}
	if denied != 3 {
		t.Errorf("deny decisions recorded = %d, want 3", denied)
	}
}

func TestAskApproved(t *testing.T) {
	e := newEnv(t, nil)
	cs, run := e.mustConnect(e.key, "")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"text": "prod"}})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	approval := waitApproval(t, e, run)
	if got := e.up.callLog(); len(got) != 0 {
		t.Fatalf("upstream called before approval: %v", got)
	}
	if _, err := e.s.ResolveApproval(e.ctx, approval, true); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r == nil || r.IsError || resultText(r) != "deploy: prod" {
		t.Fatalf("approved deploy = %+v, want forwarded", r)
	}
	recs := e.records(run)
	c := byCall(recs, lastDecided(recs, "mcp__up__deploy"))
	for _, typ := range []string{verify.TypeCallDecided, verify.TypeApprovalRequested, verify.TypeApprovalConsumed, verify.TypeCallCompleted} {
		if c[typ] == nil {
			t.Errorf("no %s record for the approved call", typ)
		}
	}
	if c[verify.TypeCallCompleted] != nil && c[verify.TypeCallCompleted].Body["outcome"] != "ok" {
		t.Errorf("completed = %v", c[verify.TypeCallCompleted].Body)
	}
}

// waitApproval returns the approval_id of the first approval.requested
// record in run, waiting for it.
func waitApproval(t *testing.T, e *env, run string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range e.records(run) {
			if r.Type == verify.TypeApprovalRequested {
				return r.Body["approval_id"].(string)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no approval requested")
	return ""
}

func TestAskTimeoutAndDeny(t *testing.T) {
	e := newEnv(t, func(o *mcpproxy.Options) { o.ApprovalWait = 300 * time.Millisecond })
	cs, run := e.mustConnect(e.key, "")
	r := call(t, cs, "deploy", map[string]any{"text": "prod"})
	if m := refusalBody(t, r); m["error"] != "approval_timeout" || m["approval_id"] == nil {
		t.Errorf("unanswered ask = %v, want approval_timeout with the approval id", m)
	}
	recs := e.records(run)
	c := byCall(recs, lastDecided(recs, "mcp__up__deploy"))
	if done := c[verify.TypeCallCompleted]; done == nil || done.Body["outcome"] != mcpproxy.OutcomeApprovalTimeout {
		t.Errorf("completion of the timed out call = %v", done)
	}

	// Denied by the operator while waiting.
	e2 := newEnv(t, nil)
	cs2, run2 := e2.mustConnect(e2.key, "")
	res := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, _ := cs2.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"text": "prod"}})
		res <- r
	}()
	if _, err := e2.s.ResolveApproval(e2.ctx, waitApproval(t, e2, run2), false); err != nil {
		t.Fatal(err)
	}
	if m := refusalBody(t, <-res); m["error"] != "approval_denied" {
		t.Errorf("denied ask = %v, want approval_denied", m)
	}
	if got := append(e.up.callLog(), e2.up.callLog()...); len(got) != 0 {
		t.Errorf("upstream calls = %v, want none", got)
	}
}

func TestToolsListFiltered(t *testing.T) {
	e := newEnv(t, nil)
	cs, _ := e.mustConnect(e.key, "")
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	// delete_repo: the config's deny glob; forbidden_tool: an
	// unconditional policy deny. deploy (ask) and echo (a conditional
	// deny) stay.
	want := []string{"deploy", "echo", "fail", "huge", "leak", "malformed", "slow"}
	if !slices.Equal(names, want) {
		t.Errorf("tools/list = %v, want %v", names, want)
	}
	r := call(t, cs, "delete_repo", map[string]any{})
	if m := refusalBody(t, r); m["error"] != "tool_not_offered" {
		t.Errorf("call of a tool the config denies = %v, want tool_not_offered", m)
	}
	if got := e.up.callLog(); len(got) != 0 {
		t.Errorf("upstream calls = %v, want none", got)
	}
}

func TestRefusedSessions(t *testing.T) {
	e := newEnv(t, nil)
	otherRun, err := e.s.Register(e.ctx, e.otherID)
	if err != nil {
		t.Fatal(err)
	}
	ownRun, err := e.s.Register(e.ctx, e.agent)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, key, run string
		want                 int
	}{
		{"no key", "/mcp/servers/up", "", "", http.StatusUnauthorized},
		{"bad key", "/mcp/servers/up", "ck_not-a-key", "", http.StatusUnauthorized},
		{"unknown server", "/mcp/servers/nope", e.key, "", http.StatusNotFound},
		{"unknown server without key", "/mcp/servers/nope", "", "", http.StatusUnauthorized},
		{"other tenant", "/mcp/servers/up", e.outsider, "", http.StatusNotFound},
		{"another agent's run", "/mcp/servers/up", e.key, otherRun.Run, http.StatusForbidden},
		{"no such run", "/mcp/servers/up", e.key, "0123456789abcdef", http.StatusForbidden},
		{"own run", "/mcp/servers/up", e.key, ownRun.Run, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.postInitialize(tc.path, tc.key, tc.run)
			if code != tc.want {
				t.Errorf("initialize = %d %s, want %d", code, body, tc.want)
			}
			if strings.Contains(body, e.key) || strings.Contains(body, e.up.secret) {
				t.Errorf("body %q carries a secret", body)
			}
		})
	}
	// The go-sdk client lying about its run cannot connect.
	if _, _, err := e.connect(e.key, otherRun.Run); err == nil {
		t.Error("connect with another agent's run succeeded")
	}
	// A session in the agent's own run records there.
	cs, run := e.mustConnect(e.key, ownRun.Run)
	if run != ownRun.Run {
		t.Errorf("session run = %s, want %s", run, ownRun.Run)
	}
	call(t, cs, "echo", map[string]any{"text": "x"})
	if id := lastDecided(e.records(ownRun.Run), "mcp__up__echo"); id == "" {
		t.Error("no decision recorded in the named run")
	}
	if recs := e.records(otherRun.Run); len(recs) != 1 {
		t.Errorf("another agent's run has %d records, want only run.registered", len(recs))
	}
}

func TestHostileUpstream(t *testing.T) {
	const limit = 256 << 10
	e := newEnv(t, func(o *mcpproxy.Options) { o.MaxResultBytes = limit })
	cs, run := e.mustConnect(e.key, "")
	for _, tc := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"huge", map[string]any{"n": limit + 1000}, "upstream_result_too_large"}, // within the envelope: the result's JSON is over
		{"huge", map[string]any{"n": 4 * limit}, "upstream_result_too_large"},    // the response read stops at the bound
		{"malformed", nil, "upstream_failed"},
		{"fail", nil, ""},
	} {
		r := call(t, cs, tc.tool, tc.args)
		if !r.IsError {
			t.Errorf("%s: not an error result: %.100q", tc.tool, resultText(r))
			continue
		}
		if tc.code != "" {
			if m := refusalBody(t, r); m["error"] != tc.code {
				t.Errorf("%s: %v, want %s", tc.tool, m, tc.code)
			}
		}
		recs := e.records(run)
		c := byCall(recs, lastDecided(recs, "mcp__up__"+tc.tool))
		if done := c[verify.TypeCallCompleted]; done == nil || done.Body["outcome"] != "error" || done.Body["result_commitment"] == nil {
			t.Errorf("%s: completion = %v, want outcome error with a result_commitment", tc.tool, done)
		}
	}
	// The session still works after the failures.
	if r := call(t, cs, "echo", map[string]any{"text": "again"}); r.IsError {
		t.Errorf("echo after failures = %q", resultText(r))
	}

	// An unreachable upstream: an error result, recorded.
	e2 := newEnv(t, nil)
	e2.up.Close()
	cs2, run2 := e2.mustConnect(e2.key, "")
	r := call(t, cs2, "echo", map[string]any{"text": "x"})
	if m := refusalBody(t, r); m["error"] != "upstream_unavailable" && m["error"] != "upstream_failed" {
		t.Errorf("unreachable upstream = %v", m)
	}
	recs := e2.records(run2)
	if done := byCall(recs, lastDecided(recs, "mcp__up__echo"))[verify.TypeCallCompleted]; done == nil || done.Body["outcome"] != "error" {
		t.Errorf("completion for the unreachable upstream = %v", done)
	}
}

func TestSignerUnavailable(t *testing.T) {
	e := newEnv(t, nil)
	cs, _ := e.mustConnect(e.key, "")
	e.rec = nil // the replica stands by
	r := call(t, cs, "echo", map[string]any{"text": "x"})
	if m := refusalBody(t, r); m["error"] != "signer_unavailable" {
		t.Errorf("call without a signer = %v, want signer_unavailable", m)
	}
	if _, err := cs.ListTools(t.Context(), nil); err == nil {
		t.Error("tools/list without a signer succeeded")
	}
	if got := e.up.callLog(); len(got) != 0 {
		t.Errorf("upstream calls = %v, want none", got)
	}
	if code, _ := e.postInitialize("/mcp/servers/up", e.key, ""); code != http.StatusServiceUnavailable {
		t.Errorf("new session without a signer = %d, want 503", code)
	}
}

// A slow upstream is cut at CallTimeout; an upstream echoing its
// credential has its result withheld; both are recorded as errors.
func TestUpstreamTimeoutAndCredentialEcho(t *testing.T) {
	e := newEnv(t, func(o *mcpproxy.Options) { o.CallTimeout = 300 * time.Millisecond })
	cs, run := e.mustConnect(e.key, "")
	for _, tc := range []struct{ tool, code string }{{"slow", "upstream_timeout"}, {"leak", "upstream_result_withheld"}} {
		r := call(t, cs, tc.tool, map[string]any{})
		if strings.Contains(resultText(r), e.up.secret) {
			t.Fatalf("%s: the client got the upstream credential: %q", tc.tool, resultText(r))
		}
		if m := refusalBody(t, r); m["error"] != tc.code {
			t.Errorf("%s = %v, want %s", tc.tool, m, tc.code)
		}
		recs := e.records(run)
		if done := byCall(recs, lastDecided(recs, "mcp__up__"+tc.tool))[verify.TypeCallCompleted]; done == nil || done.Body["outcome"] != "error" {
			t.Errorf("%s: completion = %v, want outcome error", tc.tool, done)
		}
	}
}

// A session idle for SessionTimeout ends: its upstream session and the
// run it registered are closed.
func TestSessionIdles(t *testing.T) {
	e := newEnv(t, func(o *mcpproxy.Options) { o.SessionTimeout = 200 * time.Millisecond })
	cs, run := e.mustConnect(e.key, "")
	call(t, cs, "echo", map[string]any{"text": "x"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs := e.records(run)
		if last := recs[len(recs)-1]; last.Type == verify.TypeRunClosing && last.Body["reason"] == "closed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session's run was not closed (run.closing reason closed)")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An initialize the SDK refuses (here: no Accept header) ends the session
// it began at once: the run registered for it is closed.
func TestRefusedInitializeClosesRun(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", e.srv.URL+"/mcp/servers/up", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	run := resp.Header.Get(mcpproxy.RunHeader)
	if resp.StatusCode != http.StatusBadRequest || run == "" {
		t.Fatalf("initialize without Accept = %d (run %q), want 400 from the SDK", resp.StatusCode, run)
	}
	if info, err := e.s.Status(e.ctx, e.agent, run); err != nil || !info.Closed {
		t.Errorf("run of the refused session = %+v, %v; want closed", info, err)
	}
}

// One agent's open sessions are bounded; ending one makes room.
func TestMaxSessions(t *testing.T) {
	e := newEnv(t, func(o *mcpproxy.Options) { o.MaxSessions = 2 })
	a, _ := e.mustConnect(e.key, "")
	e.mustConnect(e.key, "")
	if code, body := e.postInitialize("/mcp/servers/up", e.key, ""); code != http.StatusTooManyRequests || !strings.Contains(body, "too_many_sessions") {
		t.Errorf("third session = %d %s, want 429 too_many_sessions", code, body)
	}
	if cs, _, err := e.connect(e.other, ""); err != nil {
		t.Errorf("another agent's session refused: %v", err)
	} else {
		cs.Close()
	}
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := e.postInitialize("/mcp/servers/up", e.key, "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after ending a session: %d, want 200", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
