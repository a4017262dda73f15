package agenthook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/client"
)

// fakeSigner is an in-memory Signer: effects by tool, runs numbered r1,
// r2, ...; closed runs refuse decisions with 409 run_closed.
type fakeSigner struct {
	mu        sync.Mutex
	effects   map[string]string
	runs      int
	closed    map[string]bool
	decided   []string // "run/call/tool"
	completed []string // "run/call/outcome"
}

func newFakeSigner(effects map[string]string) *fakeSigner {
	return &fakeSigner{effects: effects, closed: map[string]bool{}}
}

func (f *fakeSigner) RegisterRun(context.Context) (client.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	time.Sleep(5 * time.Millisecond) // widen the race window
	return client.Run{Run: fmt.Sprintf("r%d", f.runs)}, nil
}

func (f *fakeSigner) Decide(_ context.Context, run, callID, tool string, _ json.RawMessage) (client.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed[run] {
		return client.Decision{}, &client.Error{Status: http.StatusConflict, Code: "run_closed"}
	}
	f.decided = append(f.decided, run+"/"+callID+"/"+tool)
	return client.Decision{CallID: callID, Effect: f.effects[tool], RuleIDs: []string{"R-" + tool}}, nil
}

func (f *fakeSigner) Complete(_ context.Context, run, callID, outcome string) (client.Appended, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = append(f.completed, run+"/"+callID+"/"+outcome)
	return client.Appended{}, nil
}

func (f *fakeSigner) CloseRun(_ context.Context, run string) (client.Appended, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed[run] = true
	return client.Appended{}, nil
}

func (f *fakeSigner) RequestApproval(context.Context, string, string, string, json.RawMessage) (client.Approval, error) {
	return client.Approval{ID: "ap1", State: "denied"}, nil
}

func (f *fakeSigner) WaitApproval(context.Context, string, string, time.Duration) (client.Approval, error) {
	return client.Approval{ID: "ap1", State: "denied"}, nil
}

func (f *fakeSigner) ConsumeApproval(context.Context, string, string, json.RawMessage) (client.Approval, error) {
	return client.Approval{}, fmt.Errorf("not approved")
}

func testOptions(t *testing.T, a Agent, s Signer) Options {
	return Options{Agent: a, Signer: s, StateDir: filepath.Join(t.TempDir(), "state")}
}

func pre(session, tool, id string) []byte {
	return []byte(fmt.Sprintf(`{"session_id":%q,"hook_event_name":"PreToolUse","tool_name":%q,"tool_input":{"n":1},"tool_use_id":%q}`, session, tool, id))
}

// TestHandleConcurrentFirstEvents: parallel hook processes of a new
// session register one run; the state is private to the user.
func TestHandleConcurrentFirstEvents(t *testing.T) {
	f := newFakeSigner(map[string]string{"Read": "allow"})
	opts := testOptions(t, ClaudeCode, f)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := Handle(context.Background(), opts, pre("s", "Read", fmt.Sprint("toolu_", i))); r.Exit != 0 || !strings.Contains(string(r.Stdout), `"allow"`) {
				t.Errorf("Handle = %+v", r)
			}
		}()
	}
	wg.Wait()
	if f.runs != 1 {
		t.Errorf("RegisterRun called %d times, want 1", f.runs)
	}
	for _, d := range f.decided {
		if !strings.HasPrefix(d, "r1/") {
			t.Errorf("decision %s outside run r1", d)
		}
	}
	fi, err := os.Stat(opts.StateDir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode = %v, %v; want 0700", fi.Mode(), err)
	}
	files, _ := filepath.Glob(filepath.Join(opts.StateDir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("state files %v, want 1", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(files[0]); strings.Contains(string(b), `"s"`) {
		t.Errorf("state file names the session id in clear: %s", b)
	}
}

// TestHandleRenewsClosedRun: a run the signer closed (idle) is replaced
// and the call decided in the new one.
func TestHandleRenewsClosedRun(t *testing.T) {
	f := newFakeSigner(map[string]string{"Read": "allow"})
	opts := testOptions(t, ClaudeCode, f)
	Handle(context.Background(), opts, pre("s", "Read", "t1"))
	f.closed["r1"] = true
	r := Handle(context.Background(), opts, pre("s", "Read", "t2"))
	if r.Exit != 0 || !strings.Contains(string(r.Stdout), "run r2, call t2") {
		t.Fatalf("Handle after close = %+v; want allowed in r2", r)
	}
}

func TestHandleDecisions(t *testing.T) {
	f := newFakeSigner(map[string]string{"Read": "allow", "Bash": "deny", "Write": "ask", "Odd": "maybe"})
	for _, tt := range []struct {
		agent     Agent
		tool      string
		exit      int
		out, errs string
	}{
		{ClaudeCode, "Read", 0, `"permissionDecision":"allow","permissionDecisionReason":"custody allowed Read: rule R-Read (run r1, call c)"`, ""},
		{ClaudeCode, "Bash", 0, `"permissionDecision":"deny","permissionDecisionReason":"custody denied Bash: rule R-Bash`, ""},
		{ClaudeCode, "Write", 0, `"permissionDecision":"deny","permissionDecisionReason":"custody denied Write: approval ap1 is denied`, ""},
		{ClaudeCode, "Odd", 2, "", `answered effect "maybe"`},
		{GeminiCLI, "Bash", 0, `{"decision":"deny","reason":"custody denied Bash: rule R-Bash`, ""},
		{Codex, "Read", 0, "", ""},
		{Codex, "Bash", 2, "", "custody denied Bash: rule R-Bash"},
	} {
		t.Run(string(tt.agent)+" "+tt.tool, func(t *testing.T) {
			ev := pre("s", tt.tool, "c")
			if tt.agent == GeminiCLI {
				ev = []byte(strings.Replace(string(ev), "PreToolUse", "BeforeTool", 1))
			}
			r := Handle(context.Background(), testOptions(t, tt.agent, f), ev)
			if r.Exit != tt.exit || !strings.Contains(string(r.Stdout), tt.out) || (tt.out == "" && len(r.Stdout) != 0) || !strings.Contains(r.Stderr, tt.errs) {
				t.Errorf("Handle = exit %d, stdout %q, stderr %q; want %d, %q, %q", r.Exit, r.Stdout, r.Stderr, tt.exit, tt.out, tt.errs)
			}
		})
	}
}

// TestHandleGeminiPairing: without tool_use_id a denied BeforeTool
// leaves nothing pending, so the AfterTool completes the call that ran.
func TestHandleGeminiPairing(t *testing.T) {
	effects := map[string]string{"write_file": "deny"}
	f := newFakeSigner(effects)
	opts := testOptions(t, GeminiCLI, f)
	before := []byte(`{"session_id":"g","hook_event_name":"BeforeTool","tool_name":"write_file","tool_input":{"a":1,"b":2}}`)
	after := []byte(`{"session_id":"g","hook_event_name":"AfterTool","tool_name":"write_file","tool_input":{"b":2,"a":1},"tool_response":{"llmContent":"ok"}}`)
	if r := Handle(context.Background(), opts, before); !strings.Contains(string(r.Stdout), `"deny"`) {
		t.Fatalf("first BeforeTool = %+v", r)
	}
	f.mu.Lock()
	effects["write_file"] = "allow"
	f.mu.Unlock()
	if r := Handle(context.Background(), opts, before); !strings.Contains(string(r.Stdout), `"allow"`) {
		t.Fatalf("second BeforeTool = %+v", r)
	}
	if r := Handle(context.Background(), opts, after); r.Exit != 0 || string(r.Stdout) != "{}\n" {
		t.Fatalf("AfterTool = %+v", r)
	}
	if len(f.completed) != 1 || !strings.HasSuffix(f.completed[0], "-2/ok") || !strings.HasPrefix(f.completed[0], "r1/g-") {
		t.Errorf("completed %v; want the second call", f.completed)
	}
	if r := Handle(context.Background(), opts, after); r.Exit != 1 || !strings.Contains(r.Stderr, "no decided write_file call") {
		t.Errorf("unpaired AfterTool = %+v; want a non-blocking report", r)
	}
}

func TestHandleSessionEnd(t *testing.T) {
	f := newFakeSigner(map[string]string{"Read": "allow"})
	opts := testOptions(t, ClaudeCode, f)
	Handle(context.Background(), opts, pre("s", "Read", "t1"))
	if r := Handle(context.Background(), opts, []byte(`{"session_id":"s","hook_event_name":"SessionEnd","reason":"exit"}`)); r.Exit != 0 {
		t.Fatalf("SessionEnd = %+v", r)
	}
	if !f.closed["r1"] {
		t.Errorf("run r1 not closed")
	}
	if ents, _ := os.ReadDir(opts.StateDir); len(ents) != 0 {
		t.Errorf("state left: %v", ents)
	}
}

func TestStateDir(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CUSTODY_HOOK_STATE_DIR": "/s", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "/s"},
		{map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/custody/hooks"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/custody/hooks"},
		{map[string]string{}, ""},
	} {
		got, err := StateDir(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("StateDir(%v) = %q, %v; want %q", tt.env, got, err, tt.want)
		}
	}
}
