package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentcustody/custody/client"
)

// The agent-side subcommands run inside a sandbox. They read CUSTODY_URL,
// CUSTODY_TOKEN_FILE and CUSTODY_AUTH, exchange the token for a key (kept
// in memory only, never written or printed) and print JSON results.

func agentClient(env Env) (*client.Client, error) {
	cfg, err := client.FromEnv(func(k string) (string, bool) { return env(k) })
	if err != nil {
		return nil, usageError{err}
	}
	return client.New(cfg)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newLoginCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "login",
		Short: "Exchange the sandbox's token for a key and print the identity it speaks for",
		Long:  "Exchange the token in $CUSTODY_TOKEN_FILE at $CUSTODY_URL and print tenant, agent, session and expiry. The key itself is not printed.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := agentClient(env)
			if err != nil {
				return err
			}
			k, err := c.Exchange(cmd.Context())
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), map[string]any{
				"tenant": k.Tenant, "agent": k.Agent, "session": k.Session, "key_id": k.KeyID, "expires_at": k.ExpiresAt,
			})
		},
	}
}

func newMemoryCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{Use: "memory", Short: "Remember, recall and forget memories in this agent's namespace"}
	var kind, key string
	var tags []string
	remember := &cobra.Command{
		Use:   "remember TEXT",
		Short: "Store a memory (the same memory twice is stored once; a keyed memory supersedes its old value)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := agentClient(env)
			if err != nil {
				return err
			}
			r, err := c.Remember(cmd.Context(), kind, key, args[0], tags...)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), r)
		},
	}
	remember.Flags().StringVar(&kind, "kind", "fact", "kind of memory, e.g. fact, preference")
	remember.Flags().StringVar(&key, "key", "", "key under which a newer value supersedes an older one")
	remember.Flags().StringSliceVar(&tags, "tag", nil, "tags (repeatable)")

	var opts client.RecallOptions
	recall := &cobra.Command{
		Use:   "recall [QUERY]",
		Short: "Search memories by keywords (no query lists the newest)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := agentClient(env)
			if err != nil {
				return err
			}
			q := ""
			if len(args) == 1 {
				q = args[0]
			}
			ms, err := c.Recall(cmd.Context(), q, opts)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), map[string]any{"memories": ms})
		},
	}
	recall.Flags().StringVar(&opts.Kind, "kind", "", "only this kind")
	recall.Flags().IntVar(&opts.Limit, "limit", 10, "at most this many (max 100)")
	recall.Flags().BoolVar(&opts.History, "history", false, "include superseded memories")

	forget := &cobra.Command{
		Use:   "forget ID",
		Short: "Delete a memory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := agentClient(env)
			if err != nil {
				return err
			}
			return c.Forget(cmd.Context(), args[0])
		},
	}
	cmd.AddCommand(remember, recall, forget)
	return cmd
}

func newStateCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{Use: "state", Short: "Read and write working state under a lease"}
	withClient := func(f func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, err := agentClient(env)
			if err != nil {
				return err
			}
			return f(cmd.Context(), c, cmd, args)
		}
	}
	get := &cobra.Command{
		Use: "get NAME", Short: "Print a working-state slot", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			s, err := c.GetState(ctx, args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), s)
		}),
	}
	var ttl time.Duration
	lease := &cobra.Command{
		Use: "lease NAME", Short: "Take (or renew) the lease on a slot; prints the epoch and the state to resume", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			l, err := c.AcquireLease(ctx, args[0], ttl)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), l)
		}),
	}
	lease.Flags().DurationVar(&ttl, "ttl", 0, "lease lifetime (0: server default, 5m)")
	var epoch, version int64
	put := &cobra.Command{
		Use: "put NAME", Short: "Write JSON from stdin under the lease epoch if the slot is at --if-match", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 16<<20))
			if err != nil {
				return err
			}
			if !json.Valid(data) {
				return usageError{fmt.Errorf("stdin is not JSON")}
			}
			s, err := c.PutState(ctx, args[0], epoch, version, data)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), s)
		}),
	}
	put.Flags().Int64Var(&epoch, "epoch", 0, "lease epoch from `custody state lease` (required)")
	put.Flags().Int64Var(&version, "if-match", 0, "version the slot must be at (0: does not exist yet)")
	_ = put.MarkFlagRequired("epoch")
	release := &cobra.Command{
		Use: "release NAME", Short: "Give up the lease", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			return c.ReleaseLease(ctx, args[0], epoch)
		}),
	}
	release.Flags().Int64Var(&epoch, "epoch", 0, "lease epoch (required)")
	_ = release.MarkFlagRequired("epoch")
	cmd.AddCommand(get, lease, put, release)
	return cmd
}
