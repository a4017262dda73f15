package agenthook

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/client"
)

// TestAttack10LockRemovedUnderWaiter: a session end removes the .lock
// file while holding it. A hook process already waiting on that file
// then gets a lock on an unlinked inode, while the next process creates
// a new .lock and locks that: both would hold "the" session lock at
// once (two runs registered, lost state writes).
func TestAttack10LockRemovedUnderWaiter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "s.lock")
	unlockA, err := lockFile(ctx, path, time.Millisecond)
	must(t, err)
	got := make(chan func(), 2)
	start := func() {
		go func() {
			u, err := lockFile(ctx, path, time.Millisecond)
			if err != nil {
				t.Error(err)
				u = func() {}
			}
			got <- u
		}()
	}
	start()                            // B
	time.Sleep(100 * time.Millisecond) // B has opened path and polls
	// A is a session end: it removes the lock file, then unlocks.
	must(t, os.Remove(path))
	unlockA()
	start() // C
	var first func()
	select {
	case first = <-got:
	case <-ctx.Done():
		t.Fatal("nobody got the lock after the holder released it")
	}
	select {
	case second := <-got:
		second()
		first()
		t.Fatal("two processes hold the session lock at once")
	case <-time.After(200 * time.Millisecond):
	}
	first()
	select {
	case second := <-got:
		second()
	case <-ctx.Done():
		t.Fatal("the other waiter never got the lock")
	}
}

// slowFirstSigner holds the decision of the first call until release
// and then denies it; every later call is allowed at once.
type slowFirstSigner struct {
	*fakeSigner
	entered, release chan struct{}
	once             sync.Once
	first            string
}

func (s *slowFirstSigner) Decide(ctx context.Context, run, callID, tool string, args json.RawMessage) (client.Decision, error) {
	isFirst := false
	s.once.Do(func() { isFirst, s.first = true, callID })
	if isFirst {
		close(s.entered)
		<-s.release
		return client.Decision{CallID: callID, Effect: "deny", RuleIDs: []string{"R-1"}}, nil
	}
	return client.Decision{CallID: callID, Effect: "allow", RuleIDs: []string{"R-2"}}, nil
}

// TestAttack10GeminiPostPairsUndecidedCall: without tool_use_id two
// BeforeTool events with the same arguments are pending; the second is
// allowed and runs while the first is still being decided (it will be
// denied). Its AfterTool must complete the call that ran, not the one
// still being decided, else the log shows a denied call completed.
func TestAttack10GeminiPostPairsUndecidedCall(t *testing.T) {
	s := &slowFirstSigner{fakeSigner: newFakeSigner(nil), entered: make(chan struct{}), release: make(chan struct{})}
	opts := testOptions(t, GeminiCLI, s)
	before := []byte(`{"session_id":"g","hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"make"}}`)
	after := []byte(`{"session_id":"g","hook_event_name":"AfterTool","tool_name":"run_shell_command","tool_input":{"command":"make"},"tool_response":{"llmContent":"ok"}}`)
	first := make(chan Result, 1)
	go func() { first <- Handle(context.Background(), opts, before) }()
	<-s.entered
	r := Handle(context.Background(), opts, before)
	if !strings.Contains(string(r.Stdout), `"allow"`) {
		close(s.release)
		t.Fatalf("second BeforeTool = %+v; want allow", r)
	}
	second := strings.TrimSuffix(strings.SplitAfter(string(r.Stdout), "call ")[1], ")\"}\n")
	if r := Handle(context.Background(), opts, after); r.Exit != 0 {
		t.Errorf("AfterTool = %+v", r)
	}
	close(s.release)
	if r := <-first; !strings.Contains(string(r.Stdout), `"deny"`) {
		t.Fatalf("first BeforeTool = %+v; want deny", r)
	}
	if len(s.completed) != 1 || s.completed[0] != "r1/"+second+"/ok" {
		t.Errorf("completed %v; want r1/%s/ok (the call that ran), not %s (denied)", s.completed, second, s.first)
	}
}

// TestAttack10OtherAgentsPreToolEvent: `custody hook claude-code` set up
// in Gemini CLI's settings (or gemini-cli in Claude Code's) sees a
// pre-tool event under another agent's name. Taken as an "other" event it
// was answered with nothing (exit 0), and the agent ran the call
// undecided: it must block instead.
func TestAttack10OtherAgentsPreToolEvent(t *testing.T) {
	for _, c := range []struct {
		agent Agent
		name  string
	}{
		{ClaudeCode, "BeforeTool"},
		{Codex, "BeforeTool"},
		{GeminiCLI, "PreToolUse"},
	} {
		t.Run(string(c.agent)+" "+c.name, func(t *testing.T) {
			f := newFakeSigner(map[string]string{"Bash": "deny"})
			ev := strings.Replace(string(pre("s", "Bash", "t1")), "PreToolUse", c.name, 1)
			r := Handle(context.Background(), testOptions(t, c.agent, f), []byte(ev))
			if r.Exit != 2 {
				t.Fatalf("Handle = %+v; want exit 2 (blocked)", r)
			}
		})
	}
}
