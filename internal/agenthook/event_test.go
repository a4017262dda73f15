package agenthook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Events as the agents' hook references document them (fields the
// parser does not use included, as the agents send them).
const (
	claudePre = `{"session_id":"abc123","transcript_path":"/Users/u/.claude/projects/p/00893aaf.jsonl","cwd":"/Users/u/p",` +
		`"permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Write",` +
		`"tool_input":{"file_path":"/path/to/file.txt","content":"file content"},"tool_use_id":"toolu_01ABC123"}`
	claudePost = `{"session_id":"abc123","transcript_path":"/t.jsonl","cwd":"/p","permission_mode":"default","hook_event_name":"PostToolUse",` +
		`"tool_name":"Write","tool_input":{"file_path":"/path/to/file.txt","content":"file content"},` +
		`"tool_response":{"filePath":"/path/to/file.txt","success":true},"tool_use_id":"toolu_01ABC123"}`
	claudeFailure = `{"session_id":"abc123","transcript_path":"/t.jsonl","cwd":"/p","permission_mode":"default","hook_event_name":"PostToolUseFailure",` +
		`"tool_name":"Bash","tool_input":{"command":"npm test","description":"Run test suite"},"tool_use_id":"toolu_01ABC123",` +
		`"error":"Command exited with non-zero status code 1","is_interrupt":false}`
	claudeStart = `{"session_id":"abc123","transcript_path":"/t.jsonl","cwd":"/p","hook_event_name":"SessionStart","source":"startup","model":"claude-sonnet-4-6"}`
	claudeEnd   = `{"session_id":"abc123","transcript_path":"/t.jsonl","cwd":"/p","hook_event_name":"SessionEnd","reason":"other"}`
	claudeStop  = `{"session_id":"abc123","transcript_path":"/t.jsonl","cwd":"/p","hook_event_name":"Stop","stop_hook_active":false}`
	geminiPre   = `{"session_id":"s1","transcript_path":"/t.json","cwd":"/p","hook_event_name":"BeforeTool","timestamp":"2025-12-01T10:30:00Z",` +
		`"tool_name":"write_file","tool_input":{"file_path":"/path/to/file.ts","content":"..."}}`
	geminiPost = `{"session_id":"s1","transcript_path":"/t.json","cwd":"/p","hook_event_name":"AfterTool","timestamp":"2025-12-01T10:30:01Z",` +
		`"tool_name":"write_file","tool_input":{"content":"...","file_path":"/path/to/file.ts"},"tool_response":{"llmContent":"ok","returnDisplay":"ok"}}`
	geminiPostErr = `{"session_id":"s1","hook_event_name":"AfterTool","tool_name":"read_file","tool_input":{"file_path":"/x"},` +
		`"tool_response":{"llmContent":"","returnDisplay":"","error":{"message":"ENOENT","type":"file_not_found"}}}`
	geminiPostText = `{"session_id":"s1","hook_event_name":"AfterTool","tool_name":"read_file","tool_input":{"file_path":"/x"},"tool_response":"file contents..."}`
	geminiStart    = `{"session_id":"s1","transcript_path":"/t.json","cwd":"/p","hook_event_name":"SessionStart","timestamp":"2025-12-01T10:30:00Z","source":"resume"}`
	geminiEnd      = `{"session_id":"s1","hook_event_name":"SessionEnd","reason":"exit"}`
	codexPre       = `{"session_id":"019a-c0de","turn_id":"t-1","transcript_path":null,"cwd":"/p","hook_event_name":"PreToolUse",` +
		`"model":"gpt-5","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"rm -f /tmp/example"},"tool_use_id":"call_abc"}`
	codexPost = `{"session_id":"019a-c0de","turn_id":"t-1","transcript_path":null,"cwd":"/p","hook_event_name":"PostToolUse",` +
		`"model":"gpt-5","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"false"},"tool_use_id":"call_abc","tool_response":{"exit_code":1,"output":""}}`
)

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name    string
		agent   Agent
		in      string
		kind    Kind
		tool    string
		args    string
		callID  string
		outcome string
	}{
		{"claude PreToolUse", ClaudeCode, claudePre, KindPreTool, "Write", `{"file_path":"/path/to/file.txt","content":"file content"}`, "toolu_01ABC123", ""},
		{"claude PostToolUse", ClaudeCode, claudePost, KindPostTool, "Write", `{"file_path":"/path/to/file.txt","content":"file content"}`, "toolu_01ABC123", "ok"},
		{"claude PostToolUseFailure", ClaudeCode, claudeFailure, KindPostTool, "Bash", `{"command":"npm test","description":"Run test suite"}`, "toolu_01ABC123", "error"},
		{"claude interrupted", ClaudeCode, strings.Replace(claudeFailure, `"is_interrupt":false`, `"is_interrupt":true`, 1), KindPostTool, "Bash", "", "toolu_01ABC123", "interrupted"},
		{"claude Bash interrupted", ClaudeCode, `{"session_id":"a","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"sleep 9"},"tool_use_id":"t","tool_response":{"stdout":"","stderr":"","interrupted":true,"isImage":false}}`, KindPostTool, "Bash", "", "t", "interrupted"},
		{"claude MCP error", ClaudeCode, `{"session_id":"a","hook_event_name":"PostToolUse","tool_name":"mcp__gh__get","tool_input":{},"tool_use_id":"t","tool_response":{"isError":true,"content":[]}}`, KindPostTool, "mcp__gh__get", "{}", "t", "error"},
		{"claude SessionStart", ClaudeCode, claudeStart, KindSessionStart, "", "", "", ""},
		{"claude SessionEnd", ClaudeCode, claudeEnd, KindSessionEnd, "", "", "", ""},
		{"claude Stop", ClaudeCode, claudeStop, KindOther, "", "", "", ""},
		{"gemini BeforeTool", GeminiCLI, geminiPre, KindPreTool, "write_file", `{"file_path":"/path/to/file.ts","content":"..."}`, "", ""},
		{"gemini AfterTool", GeminiCLI, geminiPost, KindPostTool, "write_file", "", "", "ok"},
		{"gemini AfterTool error", GeminiCLI, geminiPostErr, KindPostTool, "read_file", "", "", "error"},
		{"gemini AfterTool text", GeminiCLI, geminiPostText, KindPostTool, "read_file", "", "", "ok"},
		{"gemini SessionStart", GeminiCLI, geminiStart, KindSessionStart, "", "", "", ""},
		{"gemini SessionEnd", GeminiCLI, geminiEnd, KindSessionEnd, "", "", "", ""},
		{"gemini name is not claude's", GeminiCLI, claudePost, KindOther, "", "", "", ""},
		{"codex PreToolUse", Codex, codexPre, KindPreTool, "Bash", `{"command":"rm -f /tmp/example"}`, "call_abc", ""},
		{"codex PostToolUse exit 1", Codex, codexPost, KindPostTool, "Bash", "", "call_abc", "error"},
		{"codex has no SessionEnd", Codex, claudeEnd, KindOther, "", "", "", ""},
		{"non-object tool_input", ClaudeCode, `{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"X","tool_input":"ls"}`, KindPreTool, "X", `{"input":"ls"}`, "", ""},
		{"no tool_input", ClaudeCode, `{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"X"}`, KindPreTool, "X", `{}`, "", ""},
		{"long tool_use_id hashed", ClaudeCode, `{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"X","tool_use_id":"` + strings.Repeat("x", 200) + `"}`, KindPreTool, "X", "", "tu-", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ParseEvent(tt.agent, []byte(tt.in))
			if err != nil {
				t.Fatalf("ParseEvent = %v", err)
			}
			if ev.Kind != tt.kind || ev.Tool != tt.tool || ev.Outcome != tt.outcome || !strings.HasPrefix(ev.CallID(), tt.callID) || (tt.callID == "" && ev.CallID() != "") {
				t.Errorf("ParseEvent = kind %d tool %q outcome %q call %q; want %d %q %q %q", ev.Kind, ev.Tool, ev.Outcome, ev.CallID(), tt.kind, tt.tool, tt.outcome, tt.callID)
			}
			if tt.args != "" && string(ev.Args) != tt.args {
				t.Errorf("ParseEvent args = %s, want %s", ev.Args, tt.args)
			}
		})
	}
}

// TestArgsKey: a BeforeTool and its AfterTool pair up however the
// agent orders the arguments' members.
func TestArgsKey(t *testing.T) {
	pre, err := ParseEvent(GeminiCLI, []byte(geminiPre))
	if err != nil {
		t.Fatal(err)
	}
	post, err := ParseEvent(GeminiCLI, []byte(geminiPost))
	if err != nil {
		t.Fatal(err)
	}
	if pre.ArgsKey() != post.ArgsKey() {
		t.Errorf("ArgsKey(BeforeTool) = %s, ArgsKey(AfterTool) = %s; want equal", pre.ArgsKey(), post.ArgsKey())
	}
	other := pre
	other.Tool = "read_file"
	if other.ArgsKey() == pre.ArgsKey() {
		t.Errorf("ArgsKey does not depend on the tool")
	}
}

func TestParseEventMalformed(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "no event"},
		{"spaces", " \n", "no event"},
		{"array", `[{"session_id":"a"}]`, "not a JSON object"},
		{"truncated", `{"session_id":"a",`, "not valid JSON"},
		{"no event name", `{"session_id":"a"}`, "hook_event_name is missing"},
		{"no session", `{"hook_event_name":"SessionStart"}`, "session_id is missing"},
		{"empty session", `{"session_id":"","hook_event_name":"SessionStart"}`, "session_id is missing"},
		{"session not a string", `{"session_id":7,"hook_event_name":"SessionStart"}`, "not valid JSON"},
		{"no tool", `{"session_id":"a","hook_event_name":"PreToolUse","tool_input":{}}`, "tool_name is missing"},
		{"tool with a newline", `{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"Ba\nsh"}`, "printable"},
		{"too big", `{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"X","tool_input":{"c":"` + strings.Repeat("a", MaxEventSize) + `"}}`, "event over"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEvent(ClaudeCode, []byte(tt.in))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseEvent(%.40q) = %v; want ErrMalformed mentioning %q", tt.in, err, tt.want)
			}
		})
	}
	if _, err := ParseEvent(GeminiCLI, []byte(claudePre)); !errors.Is(err, ErrMalformed) {
		t.Errorf("ParseEvent(gemini-cli, Claude Code's PreToolUse) = %v, want ErrMalformed", err)
	}
	if _, err := ParseEvent("cursor", []byte(claudePre)); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("ParseEvent(cursor) = %v, want ErrUnknownAgent", err)
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{claudePre, claudePost, claudeFailure, claudeStart, claudeEnd, claudeStop, geminiPre, geminiPost,
		geminiPostErr, geminiPostText, geminiStart, geminiEnd, codexPre, codexPost, "", "{}", "null", `{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"X","tool_input":[1,2]}`} {
		for _, a := range Agents {
			f.Add(string(a), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, agent string, data []byte) {
		ev, err := ParseEvent(Agent(agent), data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownAgent) {
				t.Fatalf("ParseEvent error %v wraps no sentinel", err)
			}
			return
		}
		if ev.SessionID == "" || ev.Name == "" {
			t.Fatalf("ParseEvent accepted an event without session or name: %+v", ev)
		}
		if ev.Kind == KindPreTool || ev.Kind == KindPostTool {
			var m map[string]json.RawMessage
			if json.Unmarshal(ev.Args, &m) != nil || !printable(ev.Tool, 256) {
				t.Fatalf("tool event with args %q tool %q", ev.Args, ev.Tool)
			}
			if id := ev.CallID(); id != "" && !printable(id, 128) {
				t.Fatalf("CallID %q is not a valid call id", id)
			}
			if k := ev.ArgsKey(); len(k) != 32 {
				t.Fatalf("ArgsKey %q", k)
			}
		}
		if ev.Kind == KindPostTool && ev.Outcome != "ok" && ev.Outcome != "error" && ev.Outcome != "interrupted" {
			t.Fatalf("outcome %q", ev.Outcome)
		}
	})
}
