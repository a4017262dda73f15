package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

func envMap(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func runCLI(t *testing.T, ctx context.Context, env Env, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runWithIO(ctx, args, strings.NewReader(stdin), &out, &errb, env)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	noEnv := envMap(nil)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"serve", "--nope"}, "unknown flag"},
		{"no auth method", []string{"serve", "--kubernetes-auth=false"}, "no auth method"},
		{"bad ttl", []string{"serve", "--kubernetes-key-ttl=48h"}, "kubernetes-key-ttl"},
		{"bad listen", []string{"serve", "--listen=nonsense"}, "--listen"},
		{"bad log level", []string{"serve", "--log-level=loud"}, "log-level"},
		{"client without env", []string{"login"}, "CUSTODY_URL"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"witness without TLS", []string{"witness", "serve", "--name=w1.example", "--log=o=v"}, "no TLS certificate"},
		{"witness half a pair", []string{"witness", "serve", "--name=w1.example", "--log=o=v", "--tls-cert-file=c.pem"}, "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, ctx, noEnv, "", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("custody %v = exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

func TestEnvOverridesFlags(t *testing.T) {
	code, _, stderr := runCLI(t, context.Background(), envMap(map[string]string{"CUSTODY_LOG_LEVEL": "loud"}), "", "serve")
	if code != 2 || !strings.Contains(stderr, "CUSTODY_LOG_LEVEL") && !strings.Contains(stderr, "log-level") {
		t.Fatalf("CUSTODY_LOG_LEVEL=loud: exit %d, %q; want a usage error", code, stderr)
	}
}

// TestEnvSetButEmptyRefused: a variable set but empty is refused (exit 2,
// naming it) for the settings whose empty value weakens what custody
// checks, before anything is opened; for others (here the metrics
// listener, empty: disabled) it is taken as written.
func TestEnvSetButEmptyRefused(t *testing.T) {
	for _, v := range []string{"CUSTODY_DATABASE_URL", "CUSTODY_KUBERNETES_NAMESPACES", "CUSTODY_KUBERNETES_ISSUERS"} {
		code, _, stderr := runCLI(t, context.Background(), envMap(map[string]string{v: ""}), "", "serve", "--data-dir", t.TempDir())
		if code != 2 || !strings.Contains(stderr, v+" is set but empty") {
			t.Errorf("%s='': exit %d, %q; want a usage error naming it", v, code, stderr)
		}
	}
	code, _, stderr := runCLI(t, context.Background(), envMap(map[string]string{"CUSTODY_WITNESS_DATABASE_URL": ""}), "", "witness", "serve")
	if code != 2 || !strings.Contains(stderr, "CUSTODY_WITNESS_DATABASE_URL is set but empty") {
		t.Errorf("CUSTODY_WITNESS_DATABASE_URL='': exit %d, %q; want a usage error naming it", code, stderr)
	}
	// Refused for want of TLS certificates, of the listeners left: the
	// metrics one is disabled.
	code, _, stderr = runCLI(t, context.Background(), envMap(map[string]string{"CUSTODY_METRICS_LISTEN": ""}), "", "serve")
	if code != 2 || strings.Contains(stderr, "CUSTODY_METRICS_LISTEN") || !strings.Contains(stderr, "[api gateway] listeners") {
		t.Errorf("CUSTODY_METRICS_LISTEN='': exit %d, %q; want it taken as written (metrics listener disabled)", code, stderr)
	}
}

func TestServeHelpDocumentsListeners(t *testing.T) {
	code, out, _ := runCLI(t, context.Background(), envMap(nil), "", "serve", "--help")
	for _, want := range []string{"--listen", ":8865", "--admin-listen", "127.0.0.1:8867", "--metrics-listen", "--data-dir", "--kubernetes-key-ttl", "15m0s", "--key-cache-ttl", "30s", "--static-tokens-file", "--policy-resolve", "--policy-dir", "--signer-idle", "--witness", "--gateway-listen", "--read-timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("serve --help exit %d", code)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestServeStaticAndAgentCommands runs `custody serve` with the static
// auth method and drives it with the agent subcommands.
func TestServeStaticAndAgentCommands(t *testing.T) {
	dir := t.TempDir()
	token := "local-dev-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	tokens := "tokens:\n  - sha256: " + hex.EncodeToString(sum[:]) + "\n    tenant: local\n    agent: dev\n    session: laptop\n"
	must(t, os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte(tokens), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600))
	addr, metrics, gw := freeAddr(t), freeAddr(t), freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code, _, stderr := runCLI(t, ctx, envMap(nil), "", "serve", "--kubernetes-auth=false",
			"--static-tokens-file="+filepath.Join(dir, "tokens.yaml"), "--listen="+addr, "--metrics-listen="+metrics, "--gateway-listen="+gw,
			"--data-dir="+filepath.Join(dir, "data"), "--log-level=error", "--read-timeout=2s", "--plaintext=all")
		if code != 0 {
			t.Errorf("serve exit %d: %s", code, stderr)
		}
		done <- code
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitHTTP(t, "http://"+addr+"/healthz")

	env := envMap(map[string]string{"CUSTODY_URL": "http://" + addr, "CUSTODY_TOKEN_FILE": filepath.Join(dir, "token"), "CUSTODY_AUTH": "static"})
	code, out, stderr := runCLI(t, ctx, env, "", "login")
	if code != 0 || !strings.Contains(out, `"agent": "dev"`) || strings.Contains(out, "ck_") {
		t.Fatalf("login = %d %s %s; want the identity without the key", code, out, stderr)
	}
	code, out, _ = runCLI(t, ctx, env, "", "memory", "remember", "--kind=preference", "--key=shell", "uses fish")
	if code != 0 || !strings.Contains(out, `"created"`) {
		t.Fatalf("remember = %d %s", code, out)
	}
	code, out, _ = runCLI(t, ctx, env, "", "memory", "remember", "--kind=preference", "--key=shell", "uses zsh")
	if code != 0 || !strings.Contains(out, `"superseded"`) {
		t.Fatalf("remember (supersede) = %d %s", code, out)
	}
	code, out, _ = runCLI(t, ctx, env, "", "memory", "recall", "zsh")
	if code != 0 || !strings.Contains(out, "uses zsh") || strings.Contains(out, "uses fish") {
		t.Fatalf("recall = %d %s", code, out)
	}
	code, out, _ = runCLI(t, ctx, env, "", "state", "lease", "plan")
	var l struct{ Epoch int64 }
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.Epoch < 1 {
		t.Fatalf("state lease = %d %s", code, out)
	}
	code, out, stderr = runCLI(t, ctx, env, `{"step":1}`, "state", "put", "plan", "--epoch="+itoa(l.Epoch), "--if-match=0")
	if code != 0 {
		t.Fatalf("state put = %d %s %s", code, out, stderr)
	}
	code, _, stderr = runCLI(t, ctx, env, `{"step":2}`, "state", "put", "plan", "--epoch="+itoa(l.Epoch), "--if-match=0")
	if code != 1 || !strings.Contains(stderr, "412") {
		t.Fatalf("stale state put = %d %s; want exit 1 with 412", code, stderr)
	}
	code, out, _ = runCLI(t, ctx, env, "", "state", "get", "plan")
	if code != 0 || !strings.Contains(out, `"step": 1`) {
		t.Fatalf("state get = %d %s", code, out)
	}
	// A client trickling a request body is cut off at --read-timeout
	// instead of holding the connection forever.
	for _, target := range []string{addr, gw} {
		c, err := net.Dial("tcp", target)
		must(t, err)
		_, err = c.Write([]byte("POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\nx"))
		must(t, err)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		_, err = io.ReadAll(c)
		c.Close()
		if err != nil || time.Since(start) > 8*time.Second {
			t.Errorf("trickled body on %s: connection not closed by the server (%v after %v)", target, err, time.Since(start))
		}
	}

	resp, err := http.Get("http://" + metrics + "/metrics")
	must(t, err)
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(buf.String(), `custody_http_requests_total{code="200",handler="auth_static",method="post"}`) {
		t.Errorf("/metrics lacks the static exchange counter")
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer", url)
}
