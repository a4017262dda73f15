package agenthook

import "encoding/json"

// The answers, per agent (# Format in the package doc).

// preToolOutput is Claude Code's PreToolUse answer on stdout (Codex reads
// the same shape).
type preToolOutput struct {
	HookSpecificOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
	} `json:"hookSpecificOutput"`
}

// geminiOutput is Gemini CLI's BeforeTool answer on stdout.
type geminiOutput struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

func claudeDecision(decision, reason string) Result {
	var o preToolOutput
	o.HookSpecificOutput.HookEventName = "PreToolUse"
	o.HookSpecificOutput.PermissionDecision = decision
	o.HookSpecificOutput.PermissionDecisionReason = reason
	b, _ := json.Marshal(o)
	return Result{Stdout: append(b, '\n')}
}

func geminiDecision(decision, reason string) Result {
	b, _ := json.Marshal(geminiOutput{Decision: decision, Reason: reason})
	return Result{Stdout: append(b, '\n')}
}

// allow lets the call run. Codex gets an empty answer (its own approval
// policy then applies: its PreToolUse documents only deny as a decision
// every version honours).
func allow(a Agent, reason string) Result {
	switch a {
	case ClaudeCode:
		return claudeDecision("allow", reason)
	case GeminiCLI:
		return geminiDecision("allow", reason)
	}
	return Result{}
}

// deny blocks the call with reason, which the agent shows the model.
// Codex gets exit 2 with the reason on stderr, the block every Codex
// version documents.
func deny(a Agent, reason string) Result {
	switch a {
	case ClaudeCode:
		return claudeDecision("deny", reason)
	case GeminiCLI:
		return geminiDecision("deny", reason)
	}
	return Result{Stderr: reason + "\n", Exit: 2}
}

// ask hands the call to Claude Code's permission prompt (AskAgent).
func ask(a Agent, reason string) Result { return claudeDecision("ask", reason) }

// failClosed blocks a pre-tool call that could not be decided: exit 2
// with the reason on stderr, which Claude Code, Gemini CLI and Codex all
// document as blocking the tool call and showing stderr to the model.
func failClosed(err error) Result {
	return Result{Stderr: "custody hook: " + err.Error() + "; the tool call is blocked (fail closed)\n", Exit: 2}
}

// report tells the user about a problem with an event that cannot block
// anything: exit 1, which all three agents document as a non-blocking
// error shown to the user (exit 2 would hide Gemini CLI's tool result).
func report(a Agent, err error) Result {
	return Result{Stderr: "custody hook: " + err.Error() + "\n", Exit: 1}
}

// quiet is success with nothing to say: Gemini CLI parses stdout as JSON,
// so it gets {}.
func quiet(a Agent) Result {
	if a == GeminiCLI {
		return Result{Stdout: []byte("{}\n")}
	}
	return Result{}
}
