// Package agenthook puts a coding agent's tool calls through custody's
// signer by the agent's own hooks: `custody hook AGENT` is the command an
// agent's settings run for each hook event, with one event as JSON on
// stdin. [Handle] answers it in the form the agent documents.
//
// Agents and the events used (anything else only registers the run, but
// another agent's pre-tool event is malformed: a hook set up for the
// wrong agent blocks calls rather than let them run undecided):
//
//	claude-code  SessionStart, PreToolUse, PostToolUse, PostToolUseFailure, SessionEnd
//	gemini-cli   SessionStart, BeforeTool, AfterTool, SessionEnd
//	codex        SessionStart, PreToolUse, PostToolUse (Codex has no session end)
//
// # Contract
//
//   - The first event of a session (SessionStart, or any event for a
//     session_id not seen before) registers a signer run. The run id is
//     kept in a state file per session (see [StateDir]; the file is named
//     by a SHA-256 of agent and session_id, mode 0600, written by atomic
//     rename under an flock(2) on a sibling .lock file), so concurrent hook
//     processes of one session register exactly one run.
//   - A pre-tool event is decided in the run with tool_name as the tool and
//     tool_input as the arguments (a non-object wrapped as {"input": v});
//     the call id is tool_use_id when the event carries one (hashed as
//     "tu-..." if it is not a printable string of at most 128 bytes), else
//     "g-ARGSKEY-N" ([Event.ArgsKey]; N counts the session's calls with the
//     same tool and arguments), which the post-tool event finds again: the
//     first allowed (or approved) and not yet completed call with the same
//     tool and arguments, never one still being decided or denied.
//     allow and deny are answered with a reason naming the rule ids, the
//     run and the call. ask follows [AskMode]. A run the signer has closed
//     (idle_s) is replaced by a new one and the call decided there.
//   - A post-tool event completes the call with an outcome read from the
//     event ("ok", "error", "interrupted"; see [Event.Outcome]), never the
//     tool's output.
//   - A session end closes the run and removes the state.
//   - Fail closed: when a pre-tool call cannot be decided (custody
//     unreachable or refusing, configuration missing, the event malformed,
//     an answer this package does not understand, the state unusable), the
//     answer is exit 2 with the reason on stderr, which all three agents
//     document as blocking the call. Other events cannot block anything:
//     their problems are exit 1 with the reason on stderr (a non-blocking
//     error the agent shows the user).
//   - Nothing written carries the key, the token or a tool's arguments:
//     reasons name the tool, rule ids, run, call and approval ids only.
//   - The decision covers the tool_input this hook saw. Another pre-tool
//     hook of the agent may rewrite the input after it (Claude Code and
//     Codex updatedInput, Gemini CLI hookSpecificOutput.tool_input), and
//     the agent then runs a call custody did not decide: install this
//     hook where the agent's user and project settings cannot add others
//     (Claude Code managed settings with allowManagedHooksOnly, say).
//
// # Format
//
// Answers on stdout, exit 0:
//
//	claude-code  {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow|deny|ask","permissionDecisionReason":"custody denied Bash: rule R (run RUN, call toolu_1)"}}
//	gemini-cli   {"decision":"allow|deny","reason":"..."}; every other event {}
//	codex        allow: nothing; deny: exit 2, the reason on stderr
//
// Other events print nothing (Gemini CLI: {}).
package agenthook
