package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/verify"
)

// hookPolicy is tenant "local"'s policy in the hook tests: one tool
// allowed, one denied and one asked for, in Claude Code's names and
// Gemini CLI's.
const hookPolicy = `rules:
  - id: HOOK-READ
    effect: allow
    tool: Read
  - id: HOOK-BASH
    effect: deny
    tool: Bash
  - id: HOOK-WRITE
    effect: ask
    tool: Write
  - id: HOOK-GEMINI-READ
    effect: allow
    tool: read_file
  - id: HOOK-GEMINI-SHELL
    effect: deny
    tool: run_shell_command
`

// hookServer is a real `custody serve` on loopback: static auth for
// tenant "local", agent "dev", the signer with hookPolicy, and the admin
// listener.
type hookServer struct {
	t          *testing.T
	dir        string
	api, admin string
	adminToken string
	env        map[string]string
}

func startHookServer(t *testing.T) *hookServer {
	t.Helper()
	dir := t.TempDir()
	token := "hook-test-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	tokens := "tokens:\n  - sha256: " + hex.EncodeToString(sum[:]) + "\n    tenant: local\n    agent: dev\n    session: laptop\n"
	must(t, os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte(tokens), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600))
	s := &hookServer{t: t, dir: dir, api: freeAddr(t), admin: freeAddr(t), adminToken: strings.Repeat("h", 40)}
	must(t, os.WriteFile(filepath.Join(dir, "admin-token"), []byte(s.adminToken), 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "policies"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "policies", "local.yaml"), []byte(hookPolicy), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, _, stderr := runCLI(t, ctx, envMap(nil), "", "serve", "--kubernetes-auth=false",
			"--static-tokens-file="+filepath.Join(dir, "tokens.yaml"), "--listen="+s.api, "--admin-listen="+s.admin,
			"--admin-token-file="+filepath.Join(dir, "admin-token"), "--gateway-listen=", "--metrics-listen=",
			"--policy-dir="+filepath.Join(dir, "policies"), "--data-dir="+filepath.Join(dir, "data"), "--log-level=error", "--plaintext=all")
		if code != 0 && ctx.Err() == nil {
			t.Errorf("serve exit %d: %s", code, stderr)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitHTTP(t, "http://"+s.api+"/healthz")
	s.env = map[string]string{
		"CUSTODY_URL": "http://" + s.api, "CUSTODY_TOKEN_FILE": filepath.Join(dir, "token"), "CUSTODY_AUTH": "static",
		"CUSTODY_HOOK_STATE_DIR": filepath.Join(dir, "hooks"),
	}
	return s
}

// with returns the server's hook environment plus extra.
func (s *hookServer) with(extra ...string) Env {
	m := map[string]string{}
	for k, v := range s.env {
		m[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return envMap(m)
}

// hook runs `custody hook agent` with event on stdin.
func (s *hookServer) hook(env Env, agent, event string) (int, string, string) {
	s.t.Helper()
	return runCLI(s.t, context.Background(), env, event, "hook", agent)
}

// adminDo sends one admin request and returns the status and body.
func (s *hookServer) adminDo(method, path string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, "http://"+s.admin+path, nil)
	must(s.t, err)
	req.Header.Set("Authorization", "Bearer "+s.adminToken)
	resp, err := http.DefaultClient.Do(req)
	must(s.t, err)
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, []byte(b.String())
}

// records returns the run's records from its bundle on the admin listener.
func (s *hookServer) records(run string) []*verify.Record {
	s.t.Helper()
	st, b := s.adminDo("GET", "/v1/signer/runs/"+run+"/bundle")
	if st != 200 {
		s.t.Fatalf("bundle of %s = %d %s", run, st, b)
	}
	bundle, err := verify.ParseBundle(b)
	must(s.t, err)
	var out []*verify.Record
	for _, br := range bundle.Records {
		r, err := verify.ParseRecord(br.Record)
		must(s.t, err)
		out = append(out, r)
	}
	return out
}

// verified exports the run and the trust file with the CLI and returns
// what `custody verify --run` prints.
func (s *hookServer) verified(run string) string {
	s.t.Helper()
	ctx := context.Background()
	bundle, trust := filepath.Join(s.dir, run+".bundle"), filepath.Join(s.dir, "trust.json")
	admin, tok := "--admin=http://"+s.admin, "--admin-token-file="+filepath.Join(s.dir, "admin-token")
	if code, out, errs := runCLI(s.t, ctx, envMap(nil), "", "export", admin, tok, "--run", run, "-o", bundle); code != 0 {
		s.t.Fatalf("export = %d %s %s", code, out, errs)
	}
	if code, out, errs := runCLI(s.t, ctx, envMap(nil), "", "trust", admin, tok, "-o", trust); code != 0 {
		s.t.Fatalf("trust = %d %s %s", code, out, errs)
	}
	code, out, errs := runCLI(s.t, ctx, envMap(nil), "", "verify", bundle, "--trust", trust, "--run", run)
	if code != 0 {
		s.t.Fatalf("verify = %d %s %s", code, out, errs)
	}
	return strings.TrimSpace(out)
}

var runInReason = regexp.MustCompile(`\(run ([^,]+), call `)

// claudeDecision reads a Claude Code PreToolUse answer.
func claudeDecision(t *testing.T, stdout string) (decision, reason, run string) {
	t.Helper()
	var o struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(stdout), &o); err != nil || o.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Fatalf("not a PreToolUse answer: %q (%v)", stdout, err)
	}
	h := o.HookSpecificOutput
	if m := runInReason.FindStringSubmatch(h.PermissionDecisionReason); m != nil {
		run = m[1]
	}
	return h.PermissionDecision, h.PermissionDecisionReason, run
}

// claudeEvent is a Claude Code hook event as its hooks reference shows
// them: the common fields plus the event's own.
func claudeEvent(session, name string, fields string) string {
	ev := fmt.Sprintf(`{"session_id":%q,"transcript_path":"/home/u/.claude/projects/p/%s.jsonl","cwd":"/work","permission_mode":"default","hook_event_name":%q`,
		session, session, name)
	if fields != "" {
		ev += "," + fields
	}
	return ev + "}"
}

// TestHookClaudeCodeSession drives a whole Claude Code session through
// `custody hook claude-code` against a real custody: the run registered
// at SessionStart, Read allowed, Bash denied (never completed: Claude
// Code does not run it), Write asked for and approved by an operator
// through the approval flow, both completed, the run closed at
// SessionEnd; the bundle holds every decision and completion and
// `custody verify` accepts it.
func TestHookClaudeCodeSession(t *testing.T) {
	s := startHookServer(t)
	env := s.with("CUSTODY_HOOK_APPROVAL_WAIT", "20s")
	const session = "9f0c7d1e-5b7a-4a52-9d1e-claude-session"

	code, out, errs := s.hook(env, "claude-code", claudeEvent(session, "SessionStart", `"source":"startup"`))
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("SessionStart = %d %q %q; want 0 and silence", code, out, errs)
	}
	code, out, errs = s.hook(env, "claude-code", claudeEvent(session, "PreToolUse",
		`"tool_name":"Read","tool_input":{"file_path":"/work/README.md"},"tool_use_id":"toolu_01READ"`))
	decision, reason, run := claudeDecision(t, out)
	if code != 0 || decision != "allow" || !strings.Contains(reason, "HOOK-READ") || run == "" {
		t.Fatalf("PreToolUse Read = %d %q %q; want allow naming HOOK-READ and the run", code, out, errs)
	}
	code, out, errs = s.hook(env, "claude-code", claudeEvent(session, "PreToolUse",
		`"tool_name":"Bash","tool_input":{"command":"cat /etc/shadow","description":"read secrets"},"tool_use_id":"toolu_02BASH"`))
	decision, reason, run2 := claudeDecision(t, out)
	if code != 0 || decision != "deny" || !strings.Contains(reason, "HOOK-BASH") || run2 != run {
		t.Fatalf("PreToolUse Bash = %d %q %q; want deny naming HOOK-BASH in run %s", code, out, errs, run)
	}
	if strings.Contains(out+errs, "shadow") {
		t.Errorf("the answer carries the tool's arguments: %q %q", out, errs)
	}
	code, out, errs = s.hook(env, "claude-code", claudeEvent(session, "PostToolUse",
		`"tool_name":"Read","tool_input":{"file_path":"/work/README.md"},"tool_use_id":"toolu_01READ","tool_response":{"type":"text","file":{"filePath":"/work/README.md","content":"# hello"}}`))
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("PostToolUse Read = %d %q %q", code, out, errs)
	}

	// Write is asked for: the hook waits for an operator, who finds the
	// approval in the open run's bundle and approves it.
	approved := make(chan string, 1)
	go func() {
		defer close(approved)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			for _, r := range s.records(run) {
				if r.Type == verify.TypeApprovalRequested {
					id, _ := r.Body["approval_id"].(string)
					if st, b := s.adminDo("POST", "/v1/signer/approvals/"+id+"/approve"); st != 200 {
						t.Errorf("approve %s = %d %s", id, st, b)
					}
					approved <- id
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	code, out, errs = s.hook(env, "claude-code", claudeEvent(session, "PreToolUse",
		`"tool_name":"Write","tool_input":{"file_path":"/work/notes.txt","content":"hi"},"tool_use_id":"toolu_03WRITE"`))
	approvalID := <-approved
	decision, reason, _ = claudeDecision(t, out)
	if code != 0 || decision != "allow" || approvalID == "" || !strings.Contains(reason, "approval "+approvalID) || !strings.Contains(reason, "HOOK-WRITE") {
		t.Fatalf("PreToolUse Write = %d %q %q; want allow after approval %q", code, out, errs, approvalID)
	}
	code, out, errs = s.hook(env, "claude-code", claudeEvent(session, "PostToolUseFailure",
		`"tool_name":"Write","tool_input":{"file_path":"/work/notes.txt","content":"hi"},"tool_use_id":"toolu_03WRITE","error":"EACCES","is_interrupt":false`))
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("PostToolUseFailure Write = %d %q %q", code, out, errs)
	}
	if got := s.verified(run); got != fmt.Sprintf("VERIFIED TO HEAD %d (open)", len(s.records(run))-1) {
		t.Errorf("verify of the open run = %q", got)
	}
	code, out, errs = s.hook(env, "claude-code", claudeEvent(session, "SessionEnd", `"reason":"prompt_input_exit"`))
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("SessionEnd = %d %q %q", code, out, errs)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.dir, "hooks")); len(ents) != 0 {
		t.Errorf("state left after SessionEnd: %v", ents)
	}

	var got []string
	for _, r := range s.records(run) {
		switch r.Type {
		case verify.TypeCallDecided:
			got = append(got, fmt.Sprintf("decided %v %v %v", r.Body["call_id"], r.Body["effect"], r.Body["rule_ids"]))
		case verify.TypeCallCompleted:
			got = append(got, fmt.Sprintf("completed %v %v", r.Body["call_id"], r.Body["outcome"]))
		case verify.TypeApprovalRequested, verify.TypeApprovalConsumed, "approval.resolved":
			got = append(got, r.Type)
		default:
			got = append(got, r.Type)
		}
	}
	want := []string{
		"run.registered",
		"decided toolu_01READ allow [HOOK-READ]",
		"decided toolu_02BASH deny [HOOK-BASH]",
		"completed toolu_01READ ok",
		"decided toolu_03WRITE ask [HOOK-WRITE]",
		"approval.requested", "approval.resolved", "approval.consumed",
		"completed toolu_03WRITE error",
		"run.closing",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("run %s records:\n%s\nwant:\n%s", run, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v := s.verified(run); v != "VERIFIED" {
		t.Errorf("verify of the closed run = %q, want VERIFIED", v)
	}
}

// TestHookConcurrentFirstEvents: Claude Code runs hooks in parallel, so
// the first events of a new session race; they register one run.
func TestHookConcurrentFirstEvents(t *testing.T) {
	s := startHookServer(t)
	env := s.with()
	const n = 8
	runs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := claudeEvent("race-session", "PreToolUse",
				fmt.Sprintf(`"tool_name":"Read","tool_input":{"file_path":"/work/%d"},"tool_use_id":"toolu_race_%d"`, i, i))
			if i%2 == 1 {
				ev = claudeEvent("race-session", "SessionStart", `"source":"startup"`)
			}
			code, out, errs := s.hook(env, "claude-code", ev)
			if code != 0 {
				t.Errorf("event %d = %d %q %q", i, code, out, errs)
				return
			}
			if i%2 == 0 {
				_, _, runs[i] = claudeDecision(t, out)
			}
		}()
	}
	wg.Wait()
	for i := 0; i < n; i += 2 {
		if runs[i] == "" || runs[i] != runs[0] {
			t.Fatalf("decisions landed in runs %q; want one run", runs)
		}
	}
	decided := 0
	for _, r := range s.records(runs[0]) {
		if r.Type == verify.TypeCallDecided {
			decided++
		}
	}
	if decided != n/2 {
		t.Errorf("run %s holds %d decisions, want %d", runs[0], decided, n/2)
	}
	ents, _ := filepath.Glob(filepath.Join(s.dir, "hooks", "*.json"))
	if len(ents) != 1 {
		t.Errorf("state files %v; want one", ents)
	}
}

// TestHookGeminiCLISession: Gemini CLI's BeforeTool/AfterTool carry no
// tool_use_id; the hook pairs them by tool and arguments.
func TestHookGeminiCLISession(t *testing.T) {
	s := startHookServer(t)
	env := s.with()
	ev := func(name, fields string) string {
		e := fmt.Sprintf(`{"session_id":"gem-1","transcript_path":"/home/u/.gemini/tmp/t.json","cwd":"/work","hook_event_name":%q,"timestamp":"2026-12-01T10:30:00Z"`, name)
		if fields != "" {
			e += "," + fields
		}
		return e + "}"
	}
	if code, out, errs := s.hook(env, "gemini-cli", ev("SessionStart", `"source":"startup"`)); code != 0 || out != "{}\n" {
		t.Fatalf("SessionStart = %d %q %q; want 0 {}", code, out, errs)
	}
	read := `"tool_name":"read_file","tool_input":{"absolute_path":"/work/a.go"}`
	var runID string
	for i := 0; i < 2; i++ { // the same call twice: two call ids
		code, out, errs := s.hook(env, "gemini-cli", ev("BeforeTool", read))
		var o struct{ Decision, Reason string }
		if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.Decision != "allow" || !strings.Contains(o.Reason, "HOOK-GEMINI-READ") {
			t.Fatalf("BeforeTool read_file = %d %q %q", code, out, errs)
		}
		runID = runInReason.FindStringSubmatch(o.Reason)[1]
	}
	code, out, errs := s.hook(env, "gemini-cli", ev("BeforeTool", `"tool_name":"run_shell_command","tool_input":{"command":"rm -rf /"}`))
	var o struct{ Decision, Reason string }
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.Decision != "deny" || !strings.Contains(o.Reason, "HOOK-GEMINI-SHELL") {
		t.Fatalf("BeforeTool run_shell_command = %d %q %q; want deny", code, out, errs)
	}
	for _, resp := range []string{`{"llmContent":"package a","returnDisplay":"read a.go"}`, `{"llmContent":"","returnDisplay":"","error":"ENOENT"}`} {
		if code, out, errs := s.hook(env, "gemini-cli", ev("AfterTool", read+`,"tool_response":`+resp)); code != 0 || out != "{}\n" {
			t.Fatalf("AfterTool = %d %q %q", code, out, errs)
		}
	}
	if code, out, errs := s.hook(env, "gemini-cli", ev("SessionEnd", `"reason":"exit"`)); code != 0 || out != "{}\n" {
		t.Fatalf("SessionEnd = %d %q %q", code, out, errs)
	}
	var got []string
	for _, r := range s.records(runID) {
		switch r.Type {
		case verify.TypeCallDecided:
			got = append(got, fmt.Sprintf("decided %v", r.Body["effect"]))
		case verify.TypeCallCompleted:
			got = append(got, fmt.Sprintf("completed %v", r.Body["outcome"]))
		}
	}
	if want := "decided allow,decided allow,decided deny,completed ok,completed error"; strings.Join(got, ",") != want {
		t.Errorf("gemini run records %q, want %q", strings.Join(got, ","), want)
	}
	if v := s.verified(runID); v != "VERIFIED" {
		t.Errorf("verify = %q", v)
	}
}

// TestHookCodex: Codex's PreToolUse is answered with silence for allow
// and exit 2 with the reason on stderr for deny.
func TestHookCodex(t *testing.T) {
	s := startHookServer(t)
	env := s.with()
	ev := func(name, fields string) string {
		return fmt.Sprintf(`{"session_id":"codex-1","turn_id":"turn-1","transcript_path":null,"cwd":"/work","hook_event_name":%q,"model":"gpt-5","permission_mode":"default",%s}`, name, fields)
	}
	if code, out, errs := s.hook(env, "codex", ev("PreToolUse", `"tool_name":"Read","tool_use_id":"call_1","tool_input":{"file_path":"/work/x"}`)); code != 0 || out != "" || errs != "" {
		t.Fatalf("codex allow = %d %q %q; want 0 and silence", code, out, errs)
	}
	code, out, errs := s.hook(env, "codex", ev("PreToolUse", `"tool_name":"Bash","tool_use_id":"call_2","tool_input":{"command":"ls"}`))
	if code != 2 || out != "" || !strings.Contains(errs, "HOOK-BASH") {
		t.Fatalf("codex deny = %d %q %q; want exit 2 naming HOOK-BASH", code, out, errs)
	}
	if code, out, errs := s.hook(env, "codex", ev("PostToolUse", `"tool_name":"Read","tool_use_id":"call_1","tool_input":{"file_path":"/work/x"},"tool_response":"x"`)); code != 0 || out != "" {
		t.Fatalf("codex post = %d %q %q", code, out, errs)
	}
}

// TestHookAskModes: an ask no operator answers in time is denied; with
// CUSTODY_HOOK_ASK=agent Claude Code asks the person instead.
func TestHookAskModes(t *testing.T) {
	s := startHookServer(t)
	write := func(id string) string {
		return claudeEvent("ask-session", "PreToolUse", `"tool_name":"Write","tool_input":{"file_path":"/work/x","content":"y"},"tool_use_id":"`+id+`"`)
	}
	code, out, errs := s.hook(s.with("CUSTODY_HOOK_APPROVAL_WAIT", "1s"), "claude-code", write("toolu_a1"))
	decision, reason, _ := claudeDecision(t, out)
	if code != 0 || decision != "deny" || !strings.Contains(reason, "was not given within 1s") {
		t.Fatalf("unanswered ask = %d %q %q; want deny", code, out, errs)
	}
	code, out, errs = s.hook(s.with("CUSTODY_HOOK_ASK", "agent"), "claude-code", write("toolu_a2"))
	decision, reason, _ = claudeDecision(t, out)
	if code != 0 || decision != "ask" || !strings.Contains(reason, "HOOK-WRITE") {
		t.Fatalf("ask=agent = %d %q %q; want ask naming HOOK-WRITE", code, out, errs)
	}
}

// TestHookFailsClosed: whatever goes wrong, a tool call is blocked (exit
// 2, the reason on stderr) and other events report without blocking.
func TestHookFailsClosed(t *testing.T) {
	s := startHookServer(t)
	down := freeAddr(t) // nothing listens there
	pre := claudeEvent("fc", "PreToolUse", `"tool_name":"Read","tool_input":{"file_path":"/work/secret-arg"},"tool_use_id":"toolu_fc"`)
	for _, tc := range []struct {
		name  string
		env   Env
		agent string
		event string
		code  int
		want  string
	}{
		{"custody down", s.with("CUSTODY_URL", "http://"+down), "claude-code", pre, 2, "connection refused"},
		{"custody down, gemini", s.with("CUSTODY_URL", "http://"+down), "gemini-cli",
			`{"session_id":"g","hook_event_name":"BeforeTool","tool_name":"read_file","tool_input":{}}`, 2, "fail closed"},
		{"custody down, codex", s.with("CUSTODY_URL", "http://"+down), "codex", pre, 2, "fail closed"},
		{"no configuration", envMap(map[string]string{"HOME": t.TempDir()}), "claude-code", pre, 2, "CUSTODY_URL"},
		{"bad timeout", s.with("CUSTODY_HOOK_TIMEOUT", "soon"), "claude-code", pre, 2, "CUSTODY_HOOK_TIMEOUT"},
		{"not JSON", s.with(), "claude-code", "tool_name=Bash", 2, "malformed hook event"},
		{"empty stdin", s.with(), "claude-code", "", 2, "no event on stdin"},
		{"no session_id", s.with(), "claude-code", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{}}`, 2, "session_id is missing"},
		{"no tool_name", s.with(), "claude-code", `{"session_id":"x","hook_event_name":"PreToolUse","tool_input":{}}`, 2, "tool_name is missing"},
		{"unknown agent", s.with(), "cursor", pre, 2, "unknown agent"},
		{"post, custody down", s.with("CUSTODY_URL", "http://"+down), "claude-code",
			claudeEvent("fc", "PostToolUse", `"tool_name":"Read","tool_input":{},"tool_use_id":"toolu_fc","tool_response":{}`), 1, "connection refused"},
		{"session start, custody down", s.with("CUSTODY_URL", "http://"+down), "claude-code", claudeEvent("fc", "SessionStart", `"source":"startup"`), 1, "register run"},
		{"malformed post", s.with(), "gemini-cli", `{"session_id":"g","hook_event_name":"AfterTool"}`, 1, "tool_name is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := s.hook(tc.env, tc.agent, tc.event)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Fatalf("hook = %d, stdout %q, stderr %q; want exit %d mentioning %q", code, out, errs, tc.code, tc.want)
			}
			if tc.code == 2 && out != "" {
				t.Errorf("a blocked call printed %q on stdout (exit 2 must stand alone)", out)
			}
			if strings.Contains(out+errs, "secret-arg") || strings.Contains(out+errs, "hook-test-token") {
				t.Errorf("the answer leaks arguments or the token: %q %q", out, errs)
			}
		})
	}
}
