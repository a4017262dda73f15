package agenthook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentcustody/custody/verify"
)

// Agent names a coding agent whose hook protocol this package speaks.
type Agent string

// The supported agents (the argument of `custody hook`).
const (
	ClaudeCode Agent = "claude-code"
	GeminiCLI  Agent = "gemini-cli"
	Codex      Agent = "codex"
)

// Agents lists the supported agents in the order `custody hook --help`
// shows them.
var Agents = []Agent{ClaudeCode, GeminiCLI, Codex}

// ParseAgent returns the Agent named s, or ErrUnknownAgent.
func ParseAgent(s string) (Agent, error) {
	for _, a := range Agents {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: %q (want one of claude-code, gemini-cli, codex)", ErrUnknownAgent, s)
}

// Kind is what an event means to the signer, whatever the agent calls it.
type Kind int

const (
	// KindOther is an event the signer has no call for (Stop,
	// UserPromptSubmit, Notification, ...): it only registers the run
	// of an unseen session.
	KindOther Kind = iota
	// KindSessionStart: Claude Code, Gemini CLI and Codex SessionStart.
	KindSessionStart
	// KindPreTool: Claude Code and Codex PreToolUse, Gemini CLI BeforeTool.
	KindPreTool
	// KindPostTool: Claude Code PostToolUse and PostToolUseFailure, Codex
	// PostToolUse, Gemini CLI AfterTool.
	KindPostTool
	// KindSessionEnd: Claude Code and Gemini CLI SessionEnd (Codex has
	// none).
	KindSessionEnd
)

// Event is one hook event, normalised across agents.
type Event struct {
	Agent Agent
	Kind  Kind
	// Name is the agent's hook_event_name, e.g. "PreToolUse".
	Name string
	// SessionID is the agent's session_id: never empty.
	SessionID string
	// Tool is tool_name (tool events only).
	Tool string
	// Args is tool_input as a JSON object: "{}" when absent, and any
	// other JSON value v wrapped as {"input": v} (the signer decides on
	// objects). Tool events only.
	Args json.RawMessage
	// ToolUseID is tool_use_id when the event carries one (Claude Code,
	// Codex), else "".
	ToolUseID string
	// Outcome is what became of the call (KindPostTool only): "ok",
	// "error" or "interrupted", read from tool_response or the failure
	// event; never the tool's output itself.
	Outcome string
}

// MaxEventSize is the largest event accepted on stdin (a Write's
// tool_input carries the whole file).
const MaxEventSize = 16 << 20

// wireEvent is the union of the fields the three agents send. Unknown
// fields are ignored: the agents add fields between versions.
type wireEvent struct {
	SessionID     *string         `json:"session_id"`
	HookEventName *string         `json:"hook_event_name"`
	ToolName      *string         `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     *string         `json:"tool_use_id"`
	ToolResponse  json.RawMessage `json:"tool_response"`
	Error         json.RawMessage `json:"error"`
	IsInterrupt   *bool           `json:"is_interrupt"`
}

// eventNames maps each agent's hook_event_name to its Kind; a name not
// listed is KindOther.
var eventNames = map[Agent]map[string]Kind{
	ClaudeCode: {"SessionStart": KindSessionStart, "PreToolUse": KindPreTool, "PostToolUse": KindPostTool,
		"PostToolUseFailure": KindPostTool, "SessionEnd": KindSessionEnd},
	Codex:     {"SessionStart": KindSessionStart, "PreToolUse": KindPreTool, "PostToolUse": KindPostTool},
	GeminiCLI: {"SessionStart": KindSessionStart, "BeforeTool": KindPreTool, "AfterTool": KindPostTool, "SessionEnd": KindSessionEnd},
}

// otherPreTool reports whether name is any agent's pre-tool event.
func otherPreTool(name string) bool {
	for _, names := range eventNames {
		if names[name] == KindPreTool {
			return true
		}
	}
	return false
}

// ParseEvent reads one hook event of agent a. Errors wrap ErrMalformed
// and never quote the event (it may hold a tool's arguments).
func ParseEvent(a Agent, data []byte) (Event, error) {
	names, ok := eventNames[a]
	if !ok {
		return Event{}, fmt.Errorf("%w: %q", ErrUnknownAgent, a)
	}
	bad := func(why string) (Event, error) { return Event{}, fmt.Errorf("%w: %s", ErrMalformed, why) }
	if len(data) > MaxEventSize {
		return bad(fmt.Sprintf("event over %d bytes", MaxEventSize))
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return bad("no event on stdin")
	}
	if data[0] != '{' {
		return bad("the event is not a JSON object")
	}
	var w wireEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return bad("the event is not valid JSON")
	}
	if w.HookEventName == nil || *w.HookEventName == "" {
		return bad("hook_event_name is missing")
	}
	if w.SessionID == nil || *w.SessionID == "" {
		return bad("session_id is missing")
	}
	ev := Event{Agent: a, Name: *w.HookEventName, Kind: names[*w.HookEventName], SessionID: *w.SessionID}
	if _, ok := names[ev.Name]; !ok && otherPreTool(ev.Name) {
		// The hook is set up for the wrong agent: taken as an event
		// without a call, this one would run undecided.
		return bad(fmt.Sprintf("%s is another agent's pre-tool event, not %s's", ev.Name, a))
	}
	if ev.Kind != KindPreTool && ev.Kind != KindPostTool {
		return ev, nil
	}
	if w.ToolName == nil || *w.ToolName == "" {
		return bad("tool_name is missing")
	}
	ev.Tool = *w.ToolName
	if !printable(ev.Tool, 256) {
		return bad("tool_name is not a printable name of at most 256 bytes")
	}
	args, err := objectArgs(w.ToolInput)
	if err != nil {
		return bad(err.Error())
	}
	ev.Args = args
	if w.ToolUseID != nil {
		ev.ToolUseID = *w.ToolUseID
	}
	if ev.Kind == KindPostTool {
		ev.Outcome = outcome(ev.Name, w)
	}
	return ev, nil
}

// objectArgs returns tool_input as a JSON object (see Event.Args).
func objectArgs(in json.RawMessage) (json.RawMessage, error) {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(in) {
		return nil, errors.New("tool_input is not valid JSON")
	}
	if in[0] == '{' {
		return in, nil
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"input": in})
	return b, nil
}

// outcome reads what became of a call from a post-tool event: a
// PostToolUseFailure (Claude Code) is "error" ("interrupted" with
// is_interrupt); otherwise tool_response is "error" when it is an object
// saying so by any of the members the agents and MCP use (is_error,
// isError or success false, interrupted, a non-empty error, a non-zero
// exit_code/exitCode), else "ok".
func outcome(name string, w wireEvent) string {
	if name == "PostToolUseFailure" {
		if w.IsInterrupt != nil && *w.IsInterrupt {
			return "interrupted"
		}
		return "error"
	}
	var r map[string]json.RawMessage
	if json.Unmarshal(w.ToolResponse, &r) != nil {
		return "ok"
	}
	isTrue := func(k string) bool { return string(r[k]) == "true" }
	if isTrue("interrupted") {
		return "interrupted"
	}
	if isTrue("is_error") || isTrue("isError") || string(r["success"]) == "false" {
		return "error"
	}
	if e := bytes.TrimSpace(r["error"]); len(e) > 0 && !bytes.Equal(e, []byte("null")) && !bytes.Equal(e, []byte(`""`)) && !bytes.Equal(e, []byte("false")) {
		return "error"
	}
	for _, k := range []string{"exit_code", "exitCode"} {
		if c := string(r[k]); c != "" && c != "0" && c != "null" {
			return "error"
		}
	}
	return "ok"
}

// CallID returns the signer call id for a tool event: its tool_use_id
// when that is a valid call id (printable, at most 128 bytes), "tu-" and
// the SHA-256 of a longer or unprintable one, and for an agent that sends
// none (Gemini CLI) "" — the caller then uses [ArgsKey] and a counter.
func (e Event) CallID() string {
	switch {
	case e.ToolUseID == "":
		return ""
	case printable(e.ToolUseID, 128):
		return e.ToolUseID
	default:
		sum := sha256.Sum256([]byte(e.ToolUseID))
		return "tu-" + hex.EncodeToString(sum[:16])
	}
}

// ArgsKey is a digest of the tool and its canonical arguments (RFC 8785),
// the same in a BeforeTool and its AfterTool, so the two pair up without
// a tool_use_id. It is 32 hex digits.
func (e Event) ArgsKey() string {
	canon, err := verify.CanonicalizeJSON(e.Args)
	if err != nil {
		canon = e.Args
	}
	h := sha256.New()
	h.Write([]byte(e.Tool))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func printable(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f })
}
