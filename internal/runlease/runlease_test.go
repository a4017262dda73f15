package runlease_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/agentcustody/custody/internal/runlease"
)

const gatewayURL = "http://gateway.test:8866/"

// harness is one run's fakes and recorders.
type harness struct {
	ev     *events
	admin  *adminServer
	proc   *recordingClient
	logBuf *lockedBuffer
	stdout *watchWriter
	stderr *watchWriter
}

func newHarness(t *testing.T, sd *sandboxd) *harness {
	ev := &events{}
	return &harness{
		ev:     ev,
		admin:  newAdminServer(t, ev),
		proc:   &recordingClient{ProcessServiceClient: sd.client(), ev: ev},
		logBuf: &lockedBuffer{},
		stdout: newWatchWriter(""),
		stderr: newWatchWriter(""),
	}
}

func (h *harness) options(t *testing.T, command ...string) runlease.Options {
	return runlease.Options{
		Admin:      h.admin.client(t),
		Process:    h.proc,
		Providers:  []string{"anthropic"},
		GatewayURL: gatewayURL,
		Command:    command,
		RunID:      "run-test",
		Tenant:     "team-a",
		Agent:      "reviewer",
		Stdout:     h.stdout,
		Stderr:     h.stderr,
		KillGrace:  2 * time.Second,
		Log:        slog.New(slog.NewTextHandler(h.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// checkRevokedOnce checks that exactly one token was minted and that it
// was revoked exactly once, after everything else.
func (h *harness) checkRevokedOnce(t *testing.T) {
	t.Helper()
	jti, _ := h.admin.onlyToken(t)
	_, revokes, _ := h.admin.state()
	if len(revokes) != 1 || revokes[0] != jti {
		t.Errorf("revokes = %v; want exactly [%s]", revokes, jti)
	}
	if seq := h.ev.list(); len(seq) == 0 || seq[len(seq)-1] != "revoke" {
		t.Errorf("events = %v; want revoke last", seq)
	}
}

// checkNoLeak checks that the token is nowhere but where it belongs.
func (h *harness) checkNoLeak(t *testing.T, token string) {
	t.Helper()
	for name, s := range map[string]string{"log": h.logBuf.String(), "stdout": h.stdout.String(), "stderr": h.stderr.String()} {
		if strings.Contains(s, token) {
			t.Errorf("token appears in %s", name)
		}
	}
	for _, kv := range os.Environ() {
		if strings.Contains(kv, token) {
			t.Errorf("token appears in this process's environment")
		}
	}
	for _, a := range os.Args {
		if strings.Contains(a, token) {
			t.Errorf("token appears in this process's argv")
		}
	}
	for _, req := range h.proc.startRequests() {
		for _, a := range req.GetConfig().GetCommand() {
			if strings.Contains(a, token) {
				t.Errorf("token appears in the process's argv %q", req.GetConfig().GetCommand())
			}
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestProcessSeesTokenOnlyInItsEnvironment: the process gets the token and
// the base URL in its environment and nowhere else; the mint request
// carries the run's scope; revoke comes once, after the exit.
func TestProcessSeesTokenOnlyInItsEnvironment(t *testing.T) {
	h := newHarness(t, shared)
	// The process proves it holds the exact token by printing its hash.
	code, err := runlease.Run(context.Background(), h.options(t, "sh", "-c",
		`printf %s "$ANTHROPIC_BASE_URL"; test -n "$ANTHROPIC_API_KEY" || exit 9; printf %s "$ANTHROPIC_API_KEY" | sha256sum >&2`))
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v; stderr %q", code, err, h.stderr.String())
	}
	jti, token := h.admin.onlyToken(t)
	if got, want := h.stdout.String(), "http://gateway.test:8866/anthropic"; got != want {
		t.Errorf("process saw ANTHROPIC_BASE_URL=%q, want %q", got, want)
	}
	if got := h.stderr.String(); !strings.HasPrefix(got, sha256hex(token)) {
		t.Errorf("process saw a key with sha256 %q, want the minted token's %s", got, sha256hex(token))
	}
	reqs := h.proc.startRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d StartRequests, want 1", len(reqs))
	}
	env := reqs[0].GetConfig().GetEnvVars()
	want := map[string]string{"ANTHROPIC_API_KEY": token, "ANTHROPIC_BASE_URL": "http://gateway.test:8866/anthropic"}
	if len(env) != len(want) || env["ANTHROPIC_API_KEY"] != token || env["ANTHROPIC_BASE_URL"] != want["ANTHROPIC_BASE_URL"] {
		t.Errorf("env_vars has keys %v; want exactly the key and base URL", slices.Sorted(mapKeys(env)))
	}
	mints, _, _ := h.admin.state()
	m := mints[0]
	if fmt.Sprint(m["providers"]) != "[anthropic]" || m["ttl_seconds"] != float64(1800) || m["run_id"] != "run-test" ||
		m["tenant"] != "team-a" || m["agent"] != "reviewer" {
		t.Errorf("mint body = %v", m)
	}
	if seq := h.ev.list(); !slices.Equal(seq, []string{"mint", "start", "exit", "revoke"}) {
		t.Errorf("events = %v; want mint, start, exit, revoke", seq)
	}
	h.checkRevokedOnce(t)
	h.checkNoLeak(t, token)
	if !strings.Contains(h.logBuf.String(), jti) {
		t.Errorf("log does not name the jti:\n%s", h.logBuf.String())
	}
	h.admin.mu.Lock()
	bad := h.admin.badAuth
	h.admin.mu.Unlock()
	if bad != 0 {
		t.Errorf("%d admin calls without the admin token", bad)
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestProviders: each provider gets its own variables; the token is
// scoped to all of them.
func TestProviders(t *testing.T) {
	h := newHarness(t, shared)
	o := h.options(t, "sh", "-c", `printf '%s|%s|%s|%s' "$OPENAI_BASE_URL" "$GOOGLE_GEMINI_BASE_URL" "$OPENAI_API_KEY" "$GEMINI_API_KEY" | sha256sum; printf '%s %s' "$OPENAI_BASE_URL" "$GOOGLE_GEMINI_BASE_URL"`)
	o.Providers = []string{"openai", "gemini"}
	code, err := runlease.Run(context.Background(), o)
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	_, token := h.admin.onlyToken(t)
	urls := "http://gateway.test:8866/openai/v1|http://gateway.test:8866/gemini"
	want := sha256hex(urls+"|"+token+"|"+token) + "  -\n" + strings.ReplaceAll(urls, "|", " ")
	if got := h.stdout.String(); got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	mints, _, _ := h.admin.state()
	if fmt.Sprint(mints[0]["providers"]) != "[openai gemini]" {
		t.Errorf("mint providers = %v", mints[0]["providers"])
	}
	h.checkRevokedOnce(t)
}

// TestExitCodeAndStderr: a failing process's exit code comes back, its
// stderr is streamed, and its token is revoked.
func TestExitCodeAndStderr(t *testing.T) {
	h := newHarness(t, shared)
	code, err := runlease.Run(context.Background(), h.options(t, "sh", "-c", "echo out; echo oops >&2; exit 7"))
	if err != nil || code != 7 {
		t.Fatalf("Run = %d, %v; want 7, nil", code, err)
	}
	if h.stdout.String() != "out\n" || h.stderr.String() != "oops\n" {
		t.Errorf("stdout %q stderr %q", h.stdout.String(), h.stderr.String())
	}
	h.checkRevokedOnce(t)
}

// TestOutputIsStreamed: output arrives while the process still runs.
func TestOutputIsStreamed(t *testing.T) {
	h := newHarness(t, shared)
	h.stdout = newWatchWriter("first")
	gate := "gate-" + randHex(4)
	o := h.options(t, "sh", "-c", `echo first; i=0; while [ ! -e `+gate+` ]; do sleep 0.05; i=$((i+1)); [ $i -gt 200 ] && exit 3; done; echo second`)
	res := make(chan error, 1)
	go func() {
		code, err := runlease.Run(context.Background(), o)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		res <- err
	}()
	h.stdout.waitFor(t, 10*time.Second)
	if err := os.WriteFile(filepath.Join(shared.root, gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if h.stdout.String() != "first\nsecond\n" {
		t.Errorf("stdout = %q", h.stdout.String())
	}
	h.checkRevokedOnce(t)
}

// TestStdinIsClosed: a process reading stdin sees end of input.
func TestStdinIsClosed(t *testing.T) {
	h := newHarness(t, shared)
	o := h.options(t, "sh", "-c", "cat; echo eof")
	sigs := make(chan os.Signal)
	close(sigs) // a closed Signals channel is simply no more signals
	o.Signals = sigs
	code, err := runlease.Run(context.Background(), o)
	if err != nil || code != 0 || h.stdout.String() != "eof\n" {
		t.Fatalf("Run = %d, %v, stdout %q", code, err, h.stdout.String())
	}
	h.checkRevokedOnce(t)
}

// TestCancelRevokes: cancelling the run's context mid-run sends the
// process SIGTERM, waits for its exit, and still revokes (under a context
// that is not the cancelled one).
func TestCancelRevokes(t *testing.T) {
	h := newHarness(t, shared)
	h.stdout = newWatchWriter("ready")
	o := h.options(t, "sh", "-c", `trap 'echo got-TERM; exit 42' TERM; echo ready; sleep 30 & wait`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code int
		err  error
	}
	res := make(chan result, 1)
	go func() {
		code, err := runlease.Run(ctx, o)
		res <- result{code, err}
	}()
	h.stdout.waitFor(t, 10*time.Second)
	start := time.Now()
	cancel()
	r := <-res
	if r.code != 42 || !errors.Is(r.err, context.Canceled) {
		t.Errorf("Run = %d, %v; want 42 and context.Canceled", r.code, r.err)
	}
	if !strings.Contains(h.stdout.String(), "got-TERM") {
		t.Errorf("process did not get SIGTERM; stdout %q", h.stdout.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled run took %v to return", d)
	}
	h.checkRevokedOnce(t)
}

// TestKillAfterGrace: a process that ignores SIGTERM gets SIGKILL after
// KillGrace; the token is revoked.
func TestKillAfterGrace(t *testing.T) {
	h := newHarness(t, shared)
	h.stdout = newWatchWriter("ready")
	o := h.options(t, "sh", "-c", `trap '' TERM; echo ready; sleep 30 & wait`)
	o.KillGrace = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	var code int
	go func() {
		var err error
		code, err = runlease.Run(ctx, o)
		res <- err
	}()
	h.stdout.waitFor(t, 10*time.Second)
	cancel()
	err := <-res
	if code != -1 || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %d, %v; want -1 (killed) and context.Canceled", code, err)
	}
	h.checkRevokedOnce(t)
}

// TestSignalsForwarded: a signal on Options.Signals reaches the process.
func TestSignalsForwarded(t *testing.T) {
	h := newHarness(t, shared)
	h.stdout = newWatchWriter("ready")
	o := h.options(t, "sh", "-c", `sleep 30 >/dev/null 2>&1 & trap 'kill $!; echo got-INT; exit 5' INT; echo ready; wait`)
	sigs := make(chan os.Signal, 1)
	o.Signals = sigs
	res := make(chan error, 1)
	var code int
	go func() {
		var err error
		code, err = runlease.Run(context.Background(), o)
		res <- err
	}()
	h.stdout.waitFor(t, 10*time.Second)
	sigs <- syscall.SIGINT
	if err := <-res; err != nil || code != 5 {
		t.Errorf("Run = %d, %v; want 5, nil", code, err)
	}
	if !strings.Contains(h.stdout.String(), "got-INT") {
		t.Errorf("stdout %q", h.stdout.String())
	}
	h.checkRevokedOnce(t)
}

// TestSandboxdDiesMidRun: a broken stream is an error, and the token is
// still revoked.
func TestSandboxdDiesMidRun(t *testing.T) {
	sd, err := startSandboxd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sd.stop()
	h := newHarness(t, sd)
	h.stdout = newWatchWriter("\n")
	// The process prints its pid (its process group) so the orphan can be
	// cleaned up after sandboxd is gone.
	o := h.options(t, "sh", "-c", `echo $$; exec sleep 30`)
	res := make(chan error, 1)
	var code int
	go func() {
		var err error
		code, err = runlease.Run(context.Background(), o)
		res <- err
	}()
	h.stdout.waitFor(t, 10*time.Second)
	if pid, err := strconv.Atoi(strings.TrimSpace(h.stdout.String())); err == nil {
		defer syscall.Kill(-pid, syscall.SIGKILL)
	}
	sd.kill()
	select {
	case err = <-res:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after sandboxd died")
	}
	if code != -1 || !errors.Is(err, runlease.ErrNoExitEvent) {
		t.Errorf("Run = %d, %v; want -1 and ErrNoExitEvent", code, err)
	}
	h.checkRevokedOnce(t)
}

// TestSandboxdUnreachable: the process never starts, the token is revoked.
func TestSandboxdUnreachable(t *testing.T) {
	sd, err := startSandboxd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sd.kill()
	sd.stop()
	h := newHarness(t, shared)
	conn := mustConn(t, sd.addr)
	h.proc.ProcessServiceClient = processv1.NewProcessServiceClient(conn)
	code, err := runlease.Run(context.Background(), h.options(t, "true"))
	if code != -1 || err == nil {
		t.Fatalf("Run = %d, %v; want an error", code, err)
	}
	h.checkRevokedOnce(t)
}

// TestCommandNotFound: sandboxd cannot start the command; the token is
// revoked.
func TestCommandNotFound(t *testing.T) {
	h := newHarness(t, shared)
	code, err := runlease.Run(context.Background(), h.options(t, "/nonexistent/agent"))
	if code != -1 || err == nil || !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("Run = %d, %v; want a start failure", code, err)
	}
	h.checkRevokedOnce(t)
}

// TestRevokeFailureIsLoud: a revoke the admin API refuses fails the run
// with a RevokeError naming the jti and the expiry.
func TestRevokeFailureIsLoud(t *testing.T) {
	for _, tc := range []struct {
		status   int
		attempts int
	}{
		{http.StatusInternalServerError, -3}, // retried until RevokeTimeout: at least 3 attempts
		{http.StatusNotFound, 1},             // not retried: the gateway does not know the token
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			h := newHarness(t, shared)
			h.admin.revokeStatus = tc.status
			o := h.options(t, "sh", "-c", "exit 0")
			o.RevokeTimeout = 1500 * time.Millisecond
			code, err := runlease.Run(context.Background(), o)
			var re *runlease.RevokeError
			if !errors.As(err, &re) {
				t.Fatalf("Run = %d, %v; want a RevokeError", code, err)
			}
			jti, _ := h.admin.onlyToken(t)
			msg := err.Error()
			if re.JTI != jti || !strings.Contains(msg, jti) || !strings.Contains(msg, "stays valid until its expiry") || !strings.Contains(msg, strconv.Itoa(tc.status)) {
				t.Errorf("error %q does not name the jti %s, the status and the expiry", msg, jti)
			}
			if code != 0 || re.ExitCode != 0 {
				t.Errorf("exit code %d (in error %d); want the process's 0", code, re.ExitCode)
			}
			_, revokes, _ := h.admin.state()
			if (tc.attempts > 0 && len(revokes) != tc.attempts) || (tc.attempts < 0 && len(revokes) < -tc.attempts) {
				t.Errorf("%d revoke attempts, want %d (negative: at least)", len(revokes), tc.attempts)
			}
			if !strings.Contains(h.logBuf.String(), "level=ERROR") {
				t.Errorf("revoke failure not logged at error level:\n%s", h.logBuf.String())
			}
		})
	}
}

// TestRevokeTimeout: a revoke that hangs fails after RevokeTimeout.
func TestRevokeTimeout(t *testing.T) {
	h := newHarness(t, shared)
	h.admin.revokeHang = true
	o := h.options(t, "true")
	o.RevokeTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := runlease.Run(context.Background(), o)
	var re *runlease.RevokeError
	if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v; want a RevokeError from the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestMintFailureNeverStarts: no token, no process, nothing to revoke.
func TestMintFailureNeverStarts(t *testing.T) {
	h := newHarness(t, shared)
	h.admin.mintStatus = http.StatusForbidden
	marker := "started-" + randHex(4)
	code, err := runlease.Run(context.Background(), h.options(t, "touch", marker))
	var se *runlease.StatusError
	if code != -1 || !errors.As(err, &se) || se.StatusCode != 403 || se.Code != "mint_refused" {
		t.Fatalf("Run = %d, %v; want the mint's 403", code, err)
	}
	if len(h.proc.startRequests()) != 0 {
		t.Error("process started without a token")
	}
	if _, err := os.Stat(filepath.Join(shared.root, marker)); err == nil {
		t.Error("process ran without a token")
	}
	if _, revokes, _ := h.admin.state(); len(revokes) != 0 {
		t.Errorf("revoked %v without a token", revokes)
	}
}

// TestBadAdminToken: the admin API's 401 is a mint failure.
func TestBadAdminToken(t *testing.T) {
	h := newHarness(t, shared)
	o := h.options(t, "true")
	c, err := runlease.NewAdminClient(runlease.AdminOptions{URL: h.admin.URL, Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	o.Admin = c
	if code, err := runlease.Run(context.Background(), o); code != -1 || err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Run = %d, %v; want a 401 mint failure", code, err)
	}
	if len(h.proc.startRequests()) != 0 {
		t.Error("process started without a token")
	}
}

func TestOptionsValidation(t *testing.T) {
	h := newHarness(t, shared)
	base := h.options(t, "true")
	for name, mod := range map[string]func(*runlease.Options){
		"no admin":         func(o *runlease.Options) { o.Admin = nil },
		"no process":       func(o *runlease.Options) { o.Process = nil },
		"no command":       func(o *runlease.Options) { o.Command = nil },
		"no provider":      func(o *runlease.Options) { o.Providers = nil },
		"unknown provider": func(o *runlease.Options) { o.Providers = []string{"mistral"} },
		"no gateway":       func(o *runlease.Options) { o.GatewayURL = "" },
		"fractional ttl":   func(o *runlease.Options) { o.TTL = 1500 * time.Millisecond },
	} {
		o := base
		mod(&o)
		if _, err := runlease.Run(context.Background(), o); err == nil {
			t.Errorf("%s: Run succeeded", name)
		}
	}
	if mints, _, _ := h.admin.state(); len(mints) != 0 {
		t.Errorf("invalid options minted %d tokens", len(mints))
	}
}

func TestTokenFormattingHidesSecret(t *testing.T) {
	tok := runlease.Token{Token: "secret-token-value", JTI: "jti-1", ExpiresAt: time.Unix(0, 0)}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "token", tok)
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%+v", tok), fmt.Sprintf("%#v", tok), buf.String()} {
		if strings.Contains(s, "secret-token-value") || !strings.Contains(s, "jti-1") {
			t.Errorf("formatted token %q", s)
		}
	}
}

// TestEgressProxyEnvironment: with EgressProxy the process also gets
// HTTP(S)_PROXY with the run and the token as credentials (and NO_PROXY
// for the gateway); without it, none of them.
func TestEgressProxyEnvironment(t *testing.T) {
	h := newHarness(t, shared)
	o := h.options(t, "sh", "-c", `printf '%s|%s|%s' "$HTTPS_PROXY" "$http_proxy" "$NO_PROXY"`)
	o.EgressProxy = "http://custody-egress.custody:8869"
	if code, err := runlease.Run(context.Background(), o); err != nil || code != 0 {
		t.Fatalf("Run = %d, %v; stderr %q", code, err, h.stderr.String())
	}
	_, token := h.admin.onlyToken(t)
	p := "http://run-test:" + token + "@custody-egress.custody:8869"
	if got, want := h.stdout.String(), p+"|"+p+"|gateway.test"; got != want {
		t.Errorf("process saw %q, want %q", got, want)
	}
	for _, bad := range []string{"https://x:1", "http://u:p@x:1", "http://x:1/path", "x:1", "http://"} {
		if _, err := runlease.EgressEnv(bad, "http://gw:8866", "r", "t"); err == nil {
			t.Errorf("EgressEnv(%q) accepted", bad)
		}
	}
	if _, err := runlease.EgressEnv("http://x:1", "http://gw:8866", "", "t"); err == nil {
		t.Error("EgressEnv without a run accepted")
	}
}

// TestSandboxCAFileEnvironment: with SandboxCAFile the process gets the
// variables its SDKs read for a CA bundle; without it, no
// CUSTODY_CA_FILE (the others may come from sandboxd's own environment).
func TestSandboxCAFileEnvironment(t *testing.T) {
	const script = `printf '%s|%s|%s' "$CUSTODY_CA_FILE" "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS"`
	for _, c := range []struct{ file, want string }{
		{"/var/run/secrets/custody/ca.crt", "/var/run/secrets/custody/ca.crt|/var/run/secrets/custody/ca.crt|/var/run/secrets/custody/ca.crt"},
		{"", "|"},
	} {
		h := newHarness(t, shared)
		o := h.options(t, "sh", "-c", script)
		o.SandboxCAFile = c.file
		if code, err := runlease.Run(context.Background(), o); err != nil || code != 0 {
			t.Fatalf("Run = %d, %v; stderr %q", code, err, h.stderr.String())
		}
		if got := h.stdout.String(); got != c.want && (c.file != "" || !strings.HasPrefix(got, c.want)) {
			t.Errorf("SandboxCAFile %q: process saw %q, want %q", c.file, got, c.want)
		}
	}
}
