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
// case), e.g. --data-dir from CUSTODY_DATA_DIR.
func applyEnv(fs *pflag.FlagSet, prefix string, env Env) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := env(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = usageError{fmt.Errorf("%s: %w", name, e)}
			}
		}
	})
	return err
}
