package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentcustody/custody/internal/agenthook"
)

// newHookCmd is `custody hook AGENT`: one coding-agent hook event on
// stdin, the agent's answer on stdout/stderr and in the exit code (see
// internal/agenthook). Configuration is the agent subcommands'
// environment plus CUSTODY_HOOK_*; a missing or invalid one still answers
// in the agent's form (a tool call is then denied).
func newHookCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "hook claude-code|gemini-cli|codex",
		Short: "Decide a coding agent's tool calls in a signer run, from the agent's hooks",
		Long: `Run from a coding agent's hooks with one hook event as JSON on stdin. The first event of a
session registers a signer run; each tool call is decided in it before it runs (allow, deny, or
ask: custody's approval flow) and completed after; the session's end closes the run. If custody
cannot decide a call, the call is blocked (exit 2, the reason on stderr).

Environment: CUSTODY_URL, CUSTODY_TOKEN_FILE, CUSTODY_AUTH (as for custody login);
CUSTODY_HOOK_STATE_DIR (default $XDG_STATE_HOME/custody/hooks, else ~/.local/state/custody/hooks);
CUSTODY_HOOK_ASK=approval (default: wait for an operator's approval) or agent (Claude Code asks the
person at the terminal); CUSTODY_HOOK_APPROVAL_WAIT (default 50s); CUSTODY_HOOK_TIMEOUT (default
55s, the most one event may take; keep it under the hook's timeout in the agent's settings: an
agent runs the call when a hook times out).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("want exactly one AGENT argument (claude-code, gemini-cli or codex), got %d", len(args))}
			}
			if _, err := agenthook.ParseAgent(args[0]); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			agent, _ := agenthook.ParseAgent(args[0])
			opts, timeout := hookOptions(agent, env)
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			in, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), agenthook.MaxEventSize+1))
			if err != nil {
				in = nil // answered as a malformed event
			}
			res := agenthook.Handle(ctx, opts, in)
			cmd.OutOrStdout().Write(res.Stdout)
			io.WriteString(cmd.ErrOrStderr(), res.Stderr)
			if res.Exit != 0 {
				return exitError{code: res.Exit, err: errors.New("hook answered " + fmt.Sprint(res.Exit)), reported: true}
			}
			return nil
		},
	}
}

// hookOptions reads the hook's configuration from env. Problems end up
// in Options.ConfigErr (with no Signer), so Handle still answers in the
// agent's form.
func hookOptions(agent agenthook.Agent, env Env) (agenthook.Options, time.Duration) {
	opts := agenthook.Options{Agent: agent}
	var errs []error
	duration := func(name string, def time.Duration) time.Duration {
		v, ok := env(name)
		if !ok || v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a positive duration", agenthook.ErrConfig, name, v))
			return def
		}
		return d
	}
	timeout := duration("CUSTODY_HOOK_TIMEOUT", 55*time.Second)
	opts.ApprovalWait = duration("CUSTODY_HOOK_APPROVAL_WAIT", 50*time.Second)
	askEnv, _ := env("CUSTODY_HOOK_ASK")
	ask, err := agenthook.ParseAskMode(askEnv)
	errs = append(errs, err)
	opts.Ask = ask
	dir, err := agenthook.StateDir(func(k string) (string, bool) { return env(k) })
	errs = append(errs, err)
	opts.StateDir = dir
	c, err := agentClient(env)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", agenthook.ErrConfig, err))
	}
	if opts.ConfigErr = errors.Join(errs...); opts.ConfigErr == nil {
		opts.Signer = c
	}
	return opts, timeout
}
