// Package runlease runs one command in a sandbox under a gateway token that
// lives exactly as long as the command: the per-execution token lifecycle
// behind `custody exec`.
//
// # Lifecycle
//
// [Run] does, in order:
//
//  1. Mint a gateway token from the gateway's admin API ([Minter]), scoped
//     to the run's providers, with a TTL (default 30 minutes) that bounds
//     the damage should revocation fail; and one more token per brokered
//     provider ([Broker]: a declared HTTP API, GitHub), each scoped to its
//     provider alone (and, for GitHub, to its repositories). A failed mint
//     revokes the tokens already minted and starts nothing.
//  2. Start the command through sandboxd's ProcessService.Start with the
//     tokens and each provider's base URL ONLY in ProcessConfig.env_vars
//     (see [EnvVars] and [BrokerEnv]; git gets a credential helper that
//     reads its token from that environment, [GitEnv]). No token is ever
//     put in the command's argv, in this process's environment, in a file
//     or in a log line; [Token]'s String and LogValue leave it out.
//  3. Copy the process's stdout and stderr events to Options.Stdout and
//     Options.Stderr as they arrive, close the process's stdin (the runner
//     does not forward its own), and forward signals from Options.Signals
//     through ProcessService.SendSignal.
//  4. At the process's ExitEvent — or on any other way out: a cancelled
//     context, a broken sandboxd stream, an error — revoke every token
//     ([Revoker]), at once, in a deferred call under contexts detached
//     from the run's (context.WithoutCancel), each with its own timeout
//     (default 10 s).
//
// A failed revocation is never swallowed: it is logged at Error level and
// returned as a [*RevokeError] (one per token that failed, joined with
// any other error), which names the jti and says the token stays valid
// until its expiry.
//
// # Cancellation
//
// Cancelling the context passed to Run does not abandon the process at
// once: Run sends it SIGTERM, waits Options.KillGrace (default 10 s) for
// its ExitEvent, sends SIGKILL, waits KillGrace again, and only then drops
// the stream (which makes sandboxd kill the process). The token is revoked
// in every case.
//
// Only an uncatchable end of the runner itself (SIGKILL, a crash, a lost
// machine) skips the revocation; the token's TTL bounds it then.
package runlease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"
)

// Provider says how a model provider's SDKs find their key and endpoint.
type Provider struct {
	// Name is the provider's name in the gateway's paths and in a token's
	// scope, e.g. "anthropic".
	Name string
	// KeyVar is the environment variable the provider's SDKs read their
	// API key from; it receives the gateway token.
	KeyVar string
	// BaseURLVar is the environment variable that points the SDKs at
	// another endpoint; it receives GatewayURL + Path.
	BaseURLVar string
	// Path is the gateway's route prefix for the provider.
	Path string
}

// Providers are the providers the runner knows, by name.
var Providers = map[string]Provider{
	"anthropic": {Name: "anthropic", KeyVar: "ANTHROPIC_API_KEY", BaseURLVar: "ANTHROPIC_BASE_URL", Path: "/anthropic"},
	"openai":    {Name: "openai", KeyVar: "OPENAI_API_KEY", BaseURLVar: "OPENAI_BASE_URL", Path: "/openai/v1"},
	"gemini":    {Name: "gemini", KeyVar: "GEMINI_API_KEY", BaseURLVar: "GOOGLE_GEMINI_BASE_URL", Path: "/gemini"},
}

// ProviderNames lists [Providers] in sorted order.
func ProviderNames() []string {
	names := make([]string, 0, len(Providers))
	for n := range Providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ErrUnknownProvider is returned for a provider not in [Providers].
var ErrUnknownProvider = errors.New("unknown provider")

// EnvVars returns the variables that hand token to a process for each
// provider: its key variable and its base-URL variable. For "anthropic"
// and gateway "http://gw:8866" they are
//
//	ANTHROPIC_API_KEY=<token>
//	ANTHROPIC_BASE_URL=http://gw:8866/anthropic
func EnvVars(providers []string, gatewayURL, token string) (map[string]string, error) {
	gw := strings.TrimRight(gatewayURL, "/")
	env := make(map[string]string, 2*len(providers))
	for _, name := range providers {
		p, ok := Providers[name]
		if !ok {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownProvider, name, strings.Join(ProviderNames(), ", "))
		}
		env[p.KeyVar] = token
		env[p.BaseURLVar] = gw + p.Path
	}
	return env, nil
}

// EgressEnv is the environment that sends a process's HTTP(S) through
// custody's egress proxy at proxyURL (http://host:port) with run and
// token as the proxy credentials: HTTP_PROXY, HTTPS_PROXY, http_proxy
// and https_proxy set to http://RUN:TOKEN@host:port (user information
// percent-encoded), and NO_PROXY and no_proxy to the gateway's host, so
// model calls go to the gateway directly. curl, pip, git, Go, Python and
// Node clients honour them. It fails on a proxy URL that is not http
// with a host and nothing else, or an empty run or token.
func EgressEnv(proxyURL, gatewayURL, run, token string) (map[string]string, error) {
	u, err := url.Parse(proxyURL)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("egress proxy %q: want http://host:port", proxyURL)
	}
	if run == "" || token == "" {
		return nil, errors.New("egress proxy: a run and a token are required")
	}
	p := (&url.URL{Scheme: "http", User: url.UserPassword(run, token), Host: u.Host}).String()
	env := map[string]string{"HTTP_PROXY": p, "HTTPS_PROXY": p, "http_proxy": p, "https_proxy": p}
	if g, err := url.Parse(gatewayURL); err == nil && g.Hostname() != "" {
		env["NO_PROXY"], env["no_proxy"] = g.Hostname(), g.Hostname()
	}
	return env, nil
}

// Options configure one [Run]. The zero value of each optional field means
// its default.
type Options struct {
	// Admin mints and revokes the token. Required.
	Admin Admin
	// Process is sandboxd's ProcessService. Required.
	Process processv1.ProcessServiceClient
	// Providers the model token is valid for; each gets its variables
	// (see [EnvVars]). Each one of [Providers]; required unless Brokers
	// are given (no model token is minted then).
	Providers []string
	// Brokers are further tokens, one per brokered gateway provider (kind
	// http or github), each scoped to its provider alone and handed in
	// its own variables (see [BrokerEnv]); minted with the model token
	// and revoked with it.
	Brokers []Broker
	// GatewayURL is the gateway's data listener as the sandbox reaches it,
	// e.g. "http://custody-gateway.custody:8866". Required.
	GatewayURL string
	// Command is the argv of the process. Required.
	Command []string
	// Cwd is the process's working directory inside the sandbox root.
	// Default: sandboxd's root directory.
	Cwd string
	// TTL is the token's lifetime, whole seconds. Default 30 minutes.
	// Revocation ends the token earlier; the TTL bounds it should
	// revocation fail.
	TTL time.Duration
	// RunID, Tenant and Agent are recorded with the token. RunID defaults
	// to a random "run_" + 24 hex digits. When RunID is a signer run of
	// Tenant and Agent, every model call the process makes through the
	// gateway is recorded in it (and its egress decided in it).
	RunID, Tenant, Agent string
	// EgressProxy, if set, is the egress proxy as the sandbox reaches it
	// (http://host:port): the process gets HTTP_PROXY and HTTPS_PROXY
	// (and their lower-case forms) pointing at it with RunID and the
	// token as credentials, and NO_PROXY naming the gateway's host (see
	// [EgressEnv]).
	EgressProxy string
	// SandboxCAFile, if set, is the path inside the sandbox of the PEM
	// CA bundle that custody's serving certificate chains to (mounted by
	// the SandboxTemplate): the process gets CUSTODY_CA_FILE,
	// SSL_CERT_FILE (Go, OpenSSL, Python's ssl and httpx) and
	// NODE_EXTRA_CA_CERTS set to it, so SDKs trust an https GatewayURL.
	// SSL_CERT_FILE replaces a process's system roots: give a bundle that
	// holds the public roots too if the process also reaches other TLS
	// hosts (through the egress proxy, say).
	SandboxCAFile string
	// Stdout and Stderr receive the process's output as it arrives.
	// Default io.Discard.
	Stdout, Stderr io.Writer
	// Signals, if set, are forwarded to the process: SIGINT, SIGTERM and
	// SIGKILL; others are ignored. Signals that arrive before sandboxd
	// reports the process started are sent once it does.
	Signals <-chan os.Signal
	// KillGrace is how long Run waits for the process to exit after a
	// cancelled context made it send SIGTERM, and again after SIGKILL.
	// Default 10 s.
	KillGrace time.Duration
	// RevokeTimeout bounds the revocation, which runs under a context
	// detached from the run's. Default 10 s.
	RevokeTimeout time.Duration
	// SignalTimeout bounds each SendSignal and WriteStdin call. Default
	// 5 s.
	SignalTimeout time.Duration
	// Log receives one line per mint, start, exit and revocation, with
	// the jti but never the token. Default slog.Default().
	Log *slog.Logger
}

// RevokeError is a failed revocation: the token stays valid until
// ExpiresAt.
type RevokeError struct {
	JTI       string
	ExpiresAt time.Time
	// ExitCode is the process's exit code, or -1 if none was reported.
	ExitCode int
	Err      error
}

func (e *RevokeError) Error() string {
	return fmt.Sprintf("REVOKE FAILED for gateway token jti %s: %v; the token stays valid until its expiry at %s (process exit code %d)",
		e.JTI, e.Err, e.ExpiresAt.UTC().Format(time.RFC3339), e.ExitCode)
}

func (e *RevokeError) Unwrap() error { return e.Err }

// ErrNoExitEvent is wrapped by the error Run returns when the sandboxd
// stream ended or broke after the process started but before its
// ExitEvent: whether the process still runs is unknown.
var ErrNoExitEvent = errors.New("sandboxd stream ended without an ExitEvent")

func (o *Options) validate() error {
	switch {
	case o.Admin == nil:
		return errors.New("runlease: Admin is required")
	case o.Process == nil:
		return errors.New("runlease: Process is required")
	case len(o.Providers) == 0 && len(o.Brokers) == 0:
		return errors.New("runlease: at least one provider or brokered provider is required")
	case o.GatewayURL == "":
		return errors.New("runlease: GatewayURL is required")
	case len(o.Command) == 0:
		return errors.New("runlease: Command is required")
	case o.TTL < 0 || o.TTL%time.Second != 0:
		return fmt.Errorf("runlease: TTL %v is not a positive whole number of seconds", o.TTL)
	case o.KillGrace < 0, o.RevokeTimeout < 0, o.SignalTimeout < 0:
		return errors.New("runlease: negative timeout")
	}
	if _, err := EnvVars(o.Providers, o.GatewayURL, ""); err != nil {
		return fmt.Errorf("runlease: %w", err)
	}
	if err := CheckBrokers(o.Brokers, o.Providers); err != nil {
		return fmt.Errorf("runlease: %w", err)
	}
	if o.EgressProxy != "" {
		if _, err := EgressEnv(o.EgressProxy, o.GatewayURL, "run", "token"); err != nil {
			return fmt.Errorf("runlease: %w", err)
		}
	}
	if o.TTL == 0 {
		o.TTL = 30 * time.Minute
	}
	if o.KillGrace == 0 {
		o.KillGrace = 10 * time.Second
	}
	if o.RevokeTimeout == 0 {
		o.RevokeTimeout = 10 * time.Second
	}
	if o.SignalTimeout == 0 {
		o.SignalTimeout = 5 * time.Second
	}
	if o.RunID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		o.RunID = "run_" + hex.EncodeToString(b[:])
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return nil
}

// Run mints a token, runs opts.Command through sandboxd with it, and
// revokes it (see the package documentation).
//
// exitCode is the process's exit code from its ExitEvent (sandboxd reports
// -1 for a process killed by a signal), or -1 if there was none. err is
// nil only if the process ran to its ExitEvent, the context was not
// cancelled, all output was written and the token was revoked; a failed
// revocation is a [*RevokeError] in err, whatever the exit code. A mint
// failure never starts the process.
func Run(ctx context.Context, opts Options) (exitCode int, err error) {
	if err := opts.validate(); err != nil {
		return -1, err
	}
	runLog := opts.Log.With("run_id", opts.RunID)
	log := runLog
	exitCode = -1
	var minted []Token // revoked, every one, on the way out
	defer func() {
		err = errors.Join(err, revokeAll(ctx, &opts, runLog, minted, exitCode))
	}()
	mint := func(req MintRequest) (Token, error) {
		req.TTLSeconds, req.RunID, req.Tenant, req.Agent = int64(opts.TTL/time.Second), opts.RunID, opts.Tenant, opts.Agent
		tok, err := opts.Admin.Mint(ctx, req)
		if err != nil {
			return Token{}, fmt.Errorf("runlease: mint gateway token for %s (process not started): %w", strings.Join(req.Providers, ", "), err)
		}
		minted = append(minted, tok)
		runLog.InfoContext(ctx, "gateway token minted", "jti", tok.JTI, "expires_at", tok.ExpiresAt, "providers", tok.Providers, "repos", len(req.Repos))
		return tok, nil
	}
	var tok Token // the model token, if any
	if len(opts.Providers) > 0 {
		if tok, err = mint(MintRequest{Providers: opts.Providers}); err != nil {
			return -1, err
		}
		log = log.With("jti", tok.JTI)
	}
	var brokered []string
	for _, b := range opts.Brokers {
		bt, err := mint(MintRequest{Providers: []string{b.Provider}, Repos: b.Repos})
		if err != nil {
			return -1, err
		}
		brokered = append(brokered, bt.Token)
	}

	env, err := EnvVars(opts.Providers, opts.GatewayURL, tok.Token)
	if err != nil {
		return -1, fmt.Errorf("runlease: %w", err)
	}
	be, err := BrokerEnv(opts.Brokers, opts.GatewayURL, opts.SandboxCAFile, brokered)
	if err != nil {
		return -1, err
	}
	maps.Copy(env, be)
	if opts.EgressProxy != "" {
		pe, err := EgressEnv(opts.EgressProxy, opts.GatewayURL, opts.RunID, minted[0].Token)
		if err != nil {
			return -1, fmt.Errorf("runlease: %w", err)
		}
		maps.Copy(env, pe)
	}
	if f := opts.SandboxCAFile; f != "" {
		env["CUSTODY_CA_FILE"], env["SSL_CERT_FILE"], env["NODE_EXTRA_CA_CERTS"] = f, f, f
	}
	if err := ctx.Err(); err != nil {
		return -1, fmt.Errorf("runlease: cancelled before the process started: %w", err)
	}
	return runProcess(ctx, &opts, log, env)
}

// runProcess starts the process and follows it to its ExitEvent.
func runProcess(ctx context.Context, o *Options, log *slog.Logger, env map[string]string) (int, error) {
	// The stream is not bound to ctx: dropping it makes sandboxd SIGKILL
	// the process at once, and we want SIGTERM and an ExitEvent first.
	streamCtx, dropStream := context.WithCancel(context.WithoutCancel(ctx))
	defer dropStream()
	cfg := &processv1.ProcessConfig{Command: o.Command, EnvVars: env}
	if o.Cwd != "" {
		cfg.Cwd = &o.Cwd
	}
	stream, err := o.Process.Start(streamCtx, &processv1.StartRequest{Config: cfg})
	if err != nil {
		return -1, fmt.Errorf("runlease: sandboxd start: %w", err)
	}

	type outcome struct {
		code   int32
		exited bool
		err    error
	}
	pidc := make(chan int32, 1)
	done := make(chan outcome, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	// Receive events; output is written here, in arrival order.
	wg.Go(func() {
		var werr error
		write := func(w io.Writer, b []byte, name string) {
			if _, err := w.Write(b); err != nil && werr == nil {
				werr = fmt.Errorf("runlease: write process %s: %w", name, err)
			}
		}
		started := false
		for {
			ev, err := stream.Recv()
			if err != nil {
				switch {
				case !started:
					// sandboxd refuses a command it cannot start (for
					// example NotFound) on the stream, before any InitEvent.
					err = fmt.Errorf("runlease: sandboxd did not start the process: %w", err)
				case errors.Is(err, io.EOF):
					err = fmt.Errorf("runlease: %w", ErrNoExitEvent)
				default:
					err = fmt.Errorf("runlease: %w: %w", ErrNoExitEvent, err)
				}
				done <- outcome{err: errors.Join(err, werr)}
				return
			}
			switch e := ev.GetEvent().(type) {
			case *processv1.StartResponse_Init:
				started = true
				select {
				case pidc <- e.Init.GetProcessId():
				default:
				}
			case *processv1.StartResponse_Stdout:
				write(o.Stdout, e.Stdout, "stdout")
			case *processv1.StartResponse_Stderr:
				write(o.Stderr, e.Stderr, "stderr")
			case *processv1.StartResponse_Exit:
				done <- outcome{code: e.Exit.GetExitCode(), exited: true, err: werr}
				return
			}
		}
	})

	var (
		pid       int32 // 0 until the InitEvent
		pending   []processv1.Signal
		ctxDone   = ctx.Done()
		signals   = o.Signals
		escalate  <-chan time.Time
		killed    bool
		cancelled bool
	)
	send := func(sig processv1.Signal) {
		if pid == 0 {
			pending = append(pending, sig)
			return
		}
		sctx, cancel := context.WithTimeout(streamCtx, o.SignalTimeout)
		defer cancel()
		_, err := o.Process.SendSignal(sctx, &processv1.SendSignalRequest{ProcessId: pid, Signal: sig})
		switch {
		case err == nil:
			log.InfoContext(ctx, "signal sent to process", "signal", sig.String())
		case status.Code(err) == codes.NotFound:
			// Already exited; its ExitEvent is on the way.
		default:
			log.WarnContext(ctx, "could not signal process", "signal", sig.String(), "error", err)
		}
	}
	for {
		select {
		case p := <-pidc:
			pid = p
			log.InfoContext(ctx, "process started", "process_id", pid)
			closeStdin(streamCtx, o, pid)
			for _, sig := range pending {
				send(sig)
			}
			pending = nil
		case s, ok := <-signals:
			if !ok {
				signals = nil // closed: stop listening
				continue
			}
			if sig, ok := toSignal(s); ok {
				send(sig)
			}
		case <-ctxDone:
			ctxDone, cancelled = nil, true
			log.WarnContext(ctx, "run cancelled; stopping process", "grace", o.KillGrace)
			send(processv1.Signal_SIGNAL_SIGTERM)
			escalate = time.After(o.KillGrace)
		case <-escalate:
			if !killed {
				killed = true
				send(processv1.Signal_SIGNAL_SIGKILL)
				escalate = time.After(o.KillGrace)
				continue
			}
			log.ErrorContext(ctx, "process did not report its exit; dropping the sandboxd stream")
			escalate = nil
			dropStream()
		case out := <-done:
			if !out.exited {
				if cancelled {
					return -1, errors.Join(fmt.Errorf("runlease: run cancelled (%w)", context.Cause(ctx)), out.err)
				}
				return -1, out.err
			}
			code := int(out.code)
			log.InfoContext(ctx, "process exited", "exit_code", code)
			if cancelled {
				return code, errors.Join(fmt.Errorf("runlease: run cancelled (%w); process exited with code %d", context.Cause(ctx), code), out.err)
			}
			return code, out.err
		}
	}
}

// closeStdin sends EOF: the runner does not forward its own stdin, and a
// process reading stdin should see end of input rather than wait forever.
func closeStdin(ctx context.Context, o *Options, pid int32) {
	sctx, cancel := context.WithTimeout(ctx, o.SignalTimeout)
	defer cancel()
	_, err := o.Process.WriteStdin(sctx, &processv1.WriteStdinRequest{
		ProcessId: pid,
		Payload:   &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}},
	})
	if err != nil && status.Code(err) != codes.NotFound {
		o.Log.DebugContext(ctx, "could not close process stdin", "error", err)
	}
}

// toSignal maps a signal custody received to one sandboxd can deliver.
// sandboxd's API carries only SIGINT, SIGTERM and SIGKILL; SIGHUP and
// SIGQUIT (a closed terminal, Ctrl-\) are delivered as SIGTERM.
func toSignal(s os.Signal) (processv1.Signal, bool) {
	switch s {
	case syscall.SIGINT:
		return processv1.Signal_SIGNAL_SIGINT, true
	case syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return processv1.Signal_SIGNAL_SIGTERM, true
	case syscall.SIGKILL:
		return processv1.Signal_SIGNAL_SIGKILL, true
	}
	return 0, false
}

// revokeAll revokes every token in minted, at once, each under its own
// context detached from the run's with opts.RevokeTimeout, and returns a
// [*RevokeError] for each that failed (joined, in minting order), each
// also logged at Error level.
func revokeAll(ctx context.Context, opts *Options, log *slog.Logger, minted []Token, exitCode int) error {
	errs := make([]error, len(minted))
	var wg sync.WaitGroup
	for i, tok := range minted {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.RevokeTimeout)
			defer cancel()
			if rerr := opts.Admin.Revoke(rctx, tok.JTI); rerr != nil {
				errs[i] = &RevokeError{JTI: tok.JTI, ExpiresAt: tok.ExpiresAt, ExitCode: exitCode, Err: rerr}
				log.ErrorContext(rctx, "gateway token NOT revoked; it stays valid until its expiry",
					"jti", tok.JTI, "expires_at", tok.ExpiresAt, "error", rerr)
				return
			}
			log.InfoContext(rctx, "gateway token revoked", "jti", tok.JTI)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
