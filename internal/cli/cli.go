// Package cli holds custody's subcommands. [Main] is the whole program:
// cmd/custody only calls it, and tests call it with their own arguments
// and writers.
//
// Exit codes: 0 success, 1 failure, 2 invalid usage or configuration.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Version is set at build time with -ldflags "-X ...cli.Version=v1.2.3".
var Version = "dev"

// usageError marks errors that exit with 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
	// reported: the command already printed the failure (custody verify's
	// "FAILED: ..." on stdout); it is not repeated on stderr.
	reported bool
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// Env looks up an environment variable; tests inject their own.
type Env func(string) (string, bool)

// Main runs custody with args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithIO(ctx, args, os.Stdin, stdout, stderr, os.LookupEnv)
}

func runWithIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env Env) int {
	root := &cobra.Command{
		Use:           "custody",
		Short:         "Attested, short-lived access for agents in Kubernetes sandboxes",
		Long:          "custody keeps what an agent in a sandbox must not lose, must not hold, or must not be able to rewrite outside the sandbox.\n`custody serve` runs the identity exchange, the memory server, the model gateway and the signer; `custody exec` runs one process with its own gateway token;\nlogin, memory and state are the agent-side client.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newServeCmd(env),
		newLoginCmd(env),
		newMemoryCmd(env),
		newStateCmd(env),
		newExecCmd(env),
		newVerifyCmd(),
		newExportCmd(env),
		newTrustCmd(env),
		newWitnessCmd(env),
		newKeysCmd(),
		newHookCmd(env),
	)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ue usageError
	var ee exitError
	if !errors.As(err, &ee) || !ee.reported {
		fmt.Fprintf(stderr, "custody: %v\n", err)
	}
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), strings.HasPrefix(err.Error(), "unknown command"), strings.HasPrefix(err.Error(), "unknown flag"):
		return 2
	default:
		return 1
	}
}

// applyEnv sets every flag of fs not given on the command line from the
// environment variable prefix + FLAG_NAME (dashes to underscores, upper
// case), e.g. --data-dir from CUSTODY_DATA_DIR. It refuses a variable set
// but empty for a flag markEnvNonEmpty marked.
func applyEnv(fs *pflag.FlagSet, prefix string, env Env) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := env(name); ok {
			if v == "" && f.Annotations[envNonEmpty] != nil {
				err = usageError{fmt.Errorf("%s is set but empty: unset it to mean %s, or give a value", name, emptyMeaning(f))}
				return
			}
			if e := fs.Set(f.Name, v); e != nil {
				err = usageError{fmt.Errorf("%s: %w", name, e)}
			}
		}
	})
	return err
}

// envNonEmpty is the flag annotation of markEnvNonEmpty.
const envNonEmpty = "custody/env-non-empty"

// markEnvNonEmpty marks flags of fs whose empty value weakens what custody
// checks (a database URL: a private SQLite store instead of the shared
// one; namespaces or issuers: any). Set but empty in the environment,
// such a flag is more often a missing Secret value or a templating slip
// than a choice, so applyEnv refuses it (an empty value given on the
// command line is taken as written).
func markEnvNonEmpty(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, envNonEmpty, []string{"true"}); err != nil {
			panic(err) // a name that is not a flag of fs: a programming error
		}
	}
}

// emptyMeaning is what f's empty value means, from its usage text (the
// part from "empty"), or "the default".
func emptyMeaning(f *pflag.Flag) string {
	if i := strings.Index(f.Usage, "empty "); i >= 0 {
		return "what an empty --" + f.Name + " means (" + strings.TrimRight(f.Usage[i:], ".") + ")"
	}
	return "the default"
}
