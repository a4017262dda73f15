package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/agentcustody/custody/internal/runlease"
)

// execConfig holds the flags of `custody exec`.
type execConfig struct {
	sandboxd      string
	admin         adminConn
	providers     []string
	gatewayURL    string
	ttl           time.Duration
	runID         string
	tenant, agent string
	egressProxy   string
	sandboxCAFile string
	cwd           string
	killGrace     time.Duration
	revokeTimeout time.Duration
	logLevel      string
	// Brokered tokens (see execbroker.go).
	githubRepos    []string
	githubProvider string
	brokerNames    []string
}

func newExecCmd(env Env) *cobra.Command {
	var c execConfig
	cmd := &cobra.Command{
		Use:   "exec --admin URL [flags] [--] COMMAND [ARG...]",
		Short: "Run a command in a sandbox with a model-gateway token that dies with it",
		Long: `Run COMMAND through sandboxd's ProcessService with a per-run gateway token.

1. Mint a gateway token at --admin (POST /v1/gateway/tokens), authenticated with the
   admin token from --admin-token-file or $CUSTODY_ADMIN_TOKEN, or a client
   certificate (--client-cert-file); an https --admin is trusted with --ca-file.
2. Start COMMAND through sandboxd at --sandboxd with the token and the gateway's
   base URL only in the process's environment, for each --provider:
     anthropic  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL=<gateway-url>/anthropic
     openai     OPENAI_API_KEY,    OPENAI_BASE_URL=<gateway-url>/openai/v1
     gemini     GEMINI_API_KEY,    GOOGLE_GEMINI_BASE_URL=<gateway-url>/gemini
   With --egress-proxy, HTTP_PROXY and HTTPS_PROXY (and lower-case) point at custody's
   egress proxy with the run ID and the token as credentials, and NO_PROXY names the
   gateway's host: each request or CONNECT is a signer decision in the run (--run-id
   must then be a signer run of --tenant and --agent).
   The token is never put in COMMAND's arguments, in custody's environment or in a log.
3. Stream the process's stdout and stderr here. Its stdin is closed.
4. When the process exits — or custody is stopped, or sandboxd goes away — revoke the
   token (POST /v1/gateway/tokens/{jti}/revoke).

The first SIGINT or SIGTERM is forwarded to the process; a second one stops it
(SIGTERM, then SIGKILL after --kill-grace). The token is revoked either way.

Exit status: the process's exit code; 1 if the token could not be revoked (the
message names the jti, which stays valid until its expiry), if the process was
killed by a signal or if sandboxd or the admin API failed; 2 for invalid usage.
` + execBrokerHelp,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("exec: a COMMAND to run is required (custody exec [flags] -- COMMAND [ARG...])")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd.Context(), c, args, cmd.OutOrStdout(), cmd.ErrOrStderr(), env)
		},
	}
	fs := cmd.Flags()
	// Everything after COMMAND belongs to COMMAND, even what looks like a flag.
	fs.SetInterspersed(false)
	fs.StringVar(&c.sandboxd, "sandboxd", "127.0.0.1:9090", "sandboxd gRPC address (host:port), plaintext")
	c.admin.register(fs, "", "file holding the admin bearer token (default: $CUSTODY_ADMIN_TOKEN; not needed with --client-cert-file)")
	fs.StringSliceVar(&c.providers, "provider", []string{"anthropic"}, "provider(s) the token is valid for: "+strings.Join(runlease.ProviderNames(), ", ")+" (repeatable)")
	fs.StringVar(&c.gatewayURL, "gateway-url", "http://127.0.0.1:8866", "the gateway's data listener as the sandbox reaches it")
	fs.DurationVar(&c.ttl, "ttl", 30*time.Minute, "token lifetime, whole seconds; bounds the token should revocation fail")
	fs.StringVar(&c.runID, "run-id", "", "run ID recorded with the token (default: random run_<24 hex>)")
	fs.StringVar(&c.egressProxy, "egress-proxy", "", "custody's egress proxy as the sandbox reaches it (http://host:port): sets HTTP_PROXY/HTTPS_PROXY for the process with the run and its token as credentials")
	fs.StringVar(&c.sandboxCAFile, "sandbox-ca-file", "", "path inside the sandbox of custody's CA bundle (PEM): the process gets CUSTODY_CA_FILE, SSL_CERT_FILE and NODE_EXTRA_CA_CERTS set to it, so SDKs trust an https --gateway-url (SSL_CERT_FILE replaces the process's system roots)")
	fs.StringVar(&c.tenant, "tenant", "", "tenant recorded with the token")
	fs.StringVar(&c.agent, "agent", "", "agent recorded with the token")
	fs.StringVar(&c.cwd, "cwd", "", "working directory inside the sandbox root (default: sandboxd's root)")
	fs.DurationVar(&c.killGrace, "kill-grace", 10*time.Second, "after a stop, wait this long for the process before SIGKILL")
	fs.DurationVar(&c.revokeTimeout, "revoke-timeout", 10*time.Second, "time allowed for revoking the token")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level: debug, info, warn or error (logs go to stderr, never with the token)")
	fs.StringSliceVar(&c.githubRepos, "github-repo", nil, "OWNER/NAME=read|write: a github token of its own for these repositories, with git set up to use it (repeatable; see above)")
	fs.StringVar(&c.githubProvider, "github-provider", "github", "the gateway provider of kind github that --github-repo is for")
	fs.StringSliceVar(&c.brokerNames, "broker", nil, "a kind-http gateway provider that gets a token of its own, as CUSTODY_<NAME>_TOKEN and CUSTODY_<NAME>_URL (repeatable)")
	return cmd
}

func (c execConfig) validate() error {
	switch {
	case c.admin.url == "":
		return errors.New("exec: --admin is required")
	case c.sandboxd == "":
		return errors.New("exec: --sandboxd is required")
	case c.ttl <= 0 || c.ttl%time.Second != 0:
		return fmt.Errorf("exec: --ttl %v must be a positive whole number of seconds", c.ttl)
	case c.killGrace <= 0:
		return fmt.Errorf("exec: --kill-grace %v must be positive", c.killGrace)
	case c.revokeTimeout <= 0:
		return fmt.Errorf("exec: --revoke-timeout %v must be positive", c.revokeTimeout)
	case len(c.providers) == 0 && len(c.githubRepos) == 0 && len(c.brokerNames) == 0:
		return errors.New("exec: at least one --provider, --github-repo or --broker is required")
	}
	if _, err := c.brokers(); err != nil {
		return err
	}
	// The URL is a prefix that the providers' paths are appended to (the
	// process's *_BASE_URL): no query or fragment, which would swallow
	// them, and no user info, which the sandboxed process would get.
	if u, err := url.Parse(c.gatewayURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return fmt.Errorf("exec: --gateway-url %s: want http(s)://host[:port][/path] without user info, query or fragment", urlForError(c.gatewayURL))
	}
	if _, err := runlease.EnvVars(c.providers, c.gatewayURL, ""); err != nil {
		return fmt.Errorf("exec: --provider: %w", err)
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return err
	}
	if c.egressProxy != "" {
		if _, err := runlease.EgressEnv(c.egressProxy, c.gatewayURL, "run", "token"); err != nil {
			return fmt.Errorf("exec: --egress-proxy: %w", err)
		}
	}
	return nil
}

func runExec(ctx context.Context, c execConfig, command []string, stdout, stderr io.Writer, env Env) error {
	if err := c.validate(); err != nil {
		return usageError{err}
	}
	if err := c.admin.resolve(env); err != nil {
		return usageError{fmt.Errorf("exec: %w", err)}
	}
	adminTok, err := c.admin.token(env, true)
	if err != nil {
		return usageError{fmt.Errorf("exec: %w", err)}
	}
	hc, err := c.admin.httpClient(30 * time.Second)
	if err != nil {
		return usageError{fmt.Errorf("exec: %w", err)}
	}
	admin, err := runlease.NewAdminClient(runlease.AdminOptions{URL: c.admin.url, Token: adminTok, HTTPClient: hc})
	if err != nil {
		return usageError{fmt.Errorf("exec: --admin: %w", err)}
	}
	conn, err := grpc.NewClient(c.sandboxd, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return usageError{fmt.Errorf("exec: --sandboxd %q: %w", c.sandboxd, err)}
	}
	defer conn.Close()

	// Process output and log lines share stderr from two goroutines.
	errw := &lockedWriter{w: stderr}
	level, _ := parseLevel(c.logLevel)
	log := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: level}))

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// The relay outlives runCtx: signals must stay caught until Run has
	// revoked the token, however many arrive while it stops the process.
	relayCtx, endRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer endRelay()
	fwd, relayDone := relaySignals(relayCtx, stop, errw)

	brokers, _ := c.brokers() // checked by validate
	code, err := runlease.Run(runCtx, runlease.Options{
		Brokers:       brokers,
		Admin:         admin,
		Process:       processv1.NewProcessServiceClient(conn),
		Providers:     c.providers,
		GatewayURL:    c.gatewayURL,
		Command:       command,
		Cwd:           c.cwd,
		TTL:           c.ttl,
		RunID:         c.runID,
		EgressProxy:   c.egressProxy,
		SandboxCAFile: c.sandboxCAFile,
		Tenant:        c.tenant,
		Agent:         c.agent,
		Stdout:        stdout,
		Stderr:        errw,
		Signals:       fwd,
		KillGrace:     c.killGrace,
		RevokeTimeout: c.revokeTimeout,
		Log:           log,
	})
	stop()
	endRelay()
	<-relayDone
	switch {
	case err != nil:
		return exitError{code: 1, err: fmt.Errorf("exec: %w", err)}
	case code == 0:
		return nil
	case code < 0 || code > 255:
		return exitError{code: 1, err: fmt.Errorf("exec: process exited with code %d (sandboxd reports -1 for a process killed by a signal)", code)}
	default:
		return exitError{code: code, err: fmt.Errorf("exec: process exited with code %d", code)}
	}
}

// relaySignals forwards the first SIGINT/SIGTERM/SIGHUP/SIGQUIT custody
// receives to the returned channel (for the process), turns a second one
// into stop() and only reports any later one. SIGPIPE (custody's output
// closed, e.g. `| head`) is caught and ignored. So custody lives to revoke
// the token: Go's default for these signals would end custody without
// running the revoke (stopping takes at most twice --kill-grace, then the
// revocation --revoke-timeout). It stops listening when ctx is done (the
// caller's cue that the token is revoked), and then closes done.
func relaySignals(ctx context.Context, stop context.CancelFunc, msg io.Writer) (fwd <-chan os.Signal, done <-chan struct{}) {
	sigc := make(chan os.Signal, 2)
	out := make(chan os.Signal, 1)
	finished := make(chan struct{})
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		defer close(finished)
		defer signal.Stop(sigc)
		n := 0
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sigc:
				n++
				if n == 1 {
					fmt.Fprintf(msg, "custody: forwarding %v to the process; send it again to stop the process\n", s)
					out <- s
					continue
				}
				if n == 2 {
					fmt.Fprintf(msg, "custody: %v again: stopping the process (SIGTERM, then SIGKILL after --kill-grace)\n", s)
					stop()
					continue
				}
				fmt.Fprintf(msg, "custody: %v: already stopping the process; custody ends once its token is revoked\n", s)
			}
		}
	}()
	return out, finished
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
