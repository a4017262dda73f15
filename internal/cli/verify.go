package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentcustody/custody/verify"
)

// newVerifyCmd is `custody verify BUNDLE --trust trust.json`: offline, no
// network, trust only from trust.json. Exit codes from verify.ExitCode:
// 0 VERIFIED / VERIFIED TO HEAD n (open), 1 refused, 2 usage, 3 invalid
// trust, 4 unreadable input.
func newVerifyCmd() *cobra.Command {
	var trustFile, wantRun string
	cmd := &cobra.Command{
		Use:   "verify BUNDLE --trust trust.json [--run RUN]",
		Short: "Verify an exported run bundle offline against trust.json",
		Long: `Verify an exported run bundle offline. Trust comes only from trust.json: keys or
cosignatures embedded in the bundle count for nothing. Prints VERIFIED for a closed
run, VERIFIED TO HEAD n (open) for a run still open, or the first check that failed.
Exit codes: 0 verified, 1 refused, 2 usage, 3 invalid trust file, 4 unreadable bundle.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("want exactly one BUNDLE argument, got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if trustFile == "" {
				return usageError{fmt.Errorf("--trust is required")}
			}
			tb, err := os.ReadFile(trustFile)
			if err != nil {
				return exitError{code: 3, err: fmt.Errorf("read trust: %w", err)}
			}
			trust, err := verify.ParseTrust(tb)
			if err != nil {
				return exitError{code: 3, err: err}
			}
			bundle, err := os.ReadFile(args[0])
			if err != nil {
				return exitError{code: 4, err: fmt.Errorf("read bundle: %w", err)}
			}
			res, err := verify.Verify(bundle, trust)
			if err != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "FAILED: %v\n", err)
				return exitError{code: verify.ExitCode(err), err: err, reported: true}
			}
			if wantRun != "" && res.Run != wantRun {
				err := fmt.Errorf("the bundle is for run %q, not %q", res.Run, wantRun)
				fmt.Fprintf(cmd.OutOrStdout(), "FAILED: %v\n", err)
				return exitError{code: 1, err: err, reported: true}
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.String())
			return nil
		},
	}
	cmd.Flags().StringVar(&trustFile, "trust", "", "trust.json: the log's keys and origin, the witnesses' keys and quorum (required)")
	cmd.Flags().StringVar(&wantRun, "run", "", "refuse the bundle unless it is for this run id (recommended: a bundle of another run of the same log verifies too)")
	return cmd
}

// adminGet fetches path from custody's admin listener as a.
func adminGet(ctx context.Context, a *adminConn, env Env, path string) ([]byte, error) {
	if err := a.resolve(env); err != nil {
		return nil, usageError{err}
	}
	tok, err := a.token(env, false)
	if err != nil {
		return nil, usageError{err}
	}
	u, err := url.Parse(strings.TrimRight(a.url, "/") + path)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, usageError{fmt.Errorf("--admin %q: want an http(s) URL", a.url)}
	}
	hc, err := a.httpClient(2 * time.Minute)
	if err != nil {
		return nil, usageError{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// writeOut writes b to path, or to w if path is "-".
func writeOut(w io.Writer, path string, b []byte) error {
	if path == "-" {
		_, err := w.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// newExportCmd is `custody export --run ID -o run.bundle`.
func newExportCmd(env Env) *cobra.Command {
	var admin adminConn
	var run, out string
	cmd := &cobra.Command{
		Use:   "export --run ID -o run.bundle",
		Short: "Export a run from the signer as a bundle for offline verification",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return usageError{fmt.Errorf("--run is required")}
			}
			b, err := adminGet(cmd.Context(), &admin, env, "/v1/signer/runs/"+url.PathEscape(run)+"/bundle")
			if err != nil {
				return err
			}
			return writeOut(cmd.OutOrStdout(), out, b)
		},
	}
	admin.register(cmd.Flags(), "http://127.0.0.1:8867", "file holding the admin bearer token (or use --client-cert-file)")
	cmd.Flags().StringVar(&run, "run", "", "run id (required)")
	cmd.Flags().StringVarP(&out, "output", "o", "run.bundle", "output file, - for stdout")
	return cmd
}

// newTrustCmd is `custody trust -o trust.json`.
func newTrustCmd(env Env) *cobra.Command {
	var admin adminConn
	var out string
	cmd := &cobra.Command{
		Use:   "trust -o trust.json",
		Short: "Write the signer's trust.json: log keys and origin, witness keys, required cosignatures",
		Long:  "Fetch trust.json from the signer. Pin it before agents run: it is what an auditor checks bundles against.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := adminGet(cmd.Context(), &admin, env, "/v1/signer/trust")
			if err != nil {
				return err
			}
			if _, err := verify.ParseTrust(b); err != nil {
				return fmt.Errorf("the signer returned an invalid trust.json: %w", err)
			}
			return writeOut(cmd.OutOrStdout(), out, b)
		},
	}
	admin.register(cmd.Flags(), "http://127.0.0.1:8867", "file holding the admin bearer token (or use --client-cert-file)")
	cmd.Flags().StringVarP(&out, "output", "o", "trust.json", "output file, - for stdout")
	return cmd
}
