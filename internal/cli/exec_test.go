package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentcustody/custody/test/e2e/controlplane"
)

func TestExecUsageErrors(t *testing.T) {
	ctx := context.Background()
	withToken := envMap(map[string]string{"CUSTODY_ADMIN_TOKEN": "t"})
	for _, tc := range []struct {
		name string
		env  Env
		args []string
		want string
	}{
		{"no command", withToken, []string{"exec", "--admin=http://127.0.0.1:1"}, "COMMAND"},
		{"no admin", withToken, []string{"exec", "--", "true"}, "--admin"},
		{"no admin token", envMap(nil), []string{"exec", "--admin=http://127.0.0.1:1", "--", "true"}, "CUSTODY_ADMIN_TOKEN"},
		{"missing token file", envMap(nil), []string{"exec", "--admin=http://127.0.0.1:1", "--admin-token-file=/nonexistent/x", "--", "true"}, "admin-token-file"},
		{"unknown provider", withToken, []string{"exec", "--admin=http://127.0.0.1:1", "--provider=mistral", "--", "true"}, "unknown provider"},
		{"bad ttl", withToken, []string{"exec", "--admin=http://127.0.0.1:1", "--ttl=1500ms", "--", "true"}, "--ttl"},
		{"bad gateway url", withToken, []string{"exec", "--admin=http://127.0.0.1:1", "--gateway-url=gw:8866", "--", "true"}, "--gateway-url"},
		{"bad admin url", withToken, []string{"exec", "--admin=127.0.0.1:1", "--", "true"}, "--admin"},
		{"bad log level", withToken, []string{"exec", "--admin=http://127.0.0.1:1", "--log-level=loud", "--", "true"}, "log-level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, ctx, tc.env, "", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("custody %v = exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

func TestExecHelpDocumentsFlags(t *testing.T) {
	code, out, _ := runCLI(t, context.Background(), envMap(nil), "", "exec", "--help")
	for _, want := range []string{"--sandboxd", "127.0.0.1:9090", "--admin ", "--admin-token-file", "CUSTODY_ADMIN_TOKEN",
		"--provider", "[anthropic]", "--gateway-url", "http://127.0.0.1:8866", "--ttl", "30m0s", "--run-id", "--tenant", "--agent",
		"--kill-grace", "--revoke-timeout", "10s", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
		if !strings.Contains(out, want) {
			t.Errorf("exec --help lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("exec --help exit %d", code)
	}
}

// execAdmin is a minimal gateway admin API for the exec tests.
type execAdmin struct {
	*httptest.Server
	mu           sync.Mutex
	revokes      []string
	revokeStatus int
}

func newExecAdmin(t *testing.T, adminToken string) *execAdmin {
	a := &execAdmin{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/gateway/tokens", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+adminToken {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"token": "gwt.exec-test-token", "jti": "jti-exec", "expires_at": time.Now().Add(time.Hour), "providers": []string{"anthropic"}})
	})
	mux.HandleFunc("POST /v1/gateway/tokens/{jti}/revoke", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.revokes = append(a.revokes, r.PathValue("jti"))
		status := a.revokeStatus
		a.mu.Unlock()
		if status == 0 {
			status = http.StatusNoContent
		}
		w.WriteHeader(status)
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *execAdmin) revoked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.revokes...)
}

// startSandboxd runs a real sandboxd (built by the e2e harness, cached) on
// loopback and returns its gRPC address.
func startSandboxd(t *testing.T) string {
	t.Helper()
	bins, err := controlplane.Build(context.Background(), testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr, restAddr := freeAddr(t), freeAddr(t)
	_, grpcPort, _ := net.SplitHostPort(grpcAddr)
	_, restPort, _ := net.SplitHostPort(restAddr)
	cmd := exec.Command(bins["sandboxd"], "--grpc-port", grpcPort, "--rest-port", restPort, "--root-dir", t.TempDir())
	must(t, cmd.Start())
	t.Cleanup(func() {
		// SIGKILL: every process it ran has exited, and SIGTERM costs 2 s.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", grpcAddr, time.Second)
		if err == nil {
			c.Close()
			return grpcAddr
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxd did not listen on %s: %v", grpcAddr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestExecRunsCommandAndRevokes drives `custody exec` end to end against a
// real sandboxd: exit codes propagate, output is passed through, the token
// reaches only the process, and a failed revoke exits 1 naming the jti.
func TestExecRunsCommandAndRevokes(t *testing.T) {
	sd := startSandboxd(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	must(t, os.WriteFile(tokenFile, []byte("admin-0123\n"), 0o600))
	admin := newExecAdmin(t, "admin-0123")
	ctx := context.Background()
	base := []string{"exec", "--sandboxd=" + sd, "--admin=" + admin.URL, "--admin-token-file=" + tokenFile, "--gateway-url=http://gw.test:8866"}

	// Flags after COMMAND belong to COMMAND; no "--" needed.
	code, out, stderr := runCLI(t, ctx, envMap(nil), "", append(base, "sh", "-c",
		`printf %s "$ANTHROPIC_BASE_URL"; [ "$ANTHROPIC_API_KEY" = gwt.exec-test-token ] || exit 9; echo err >&2; exit 7`)...)
	if code != 7 || out != "http://gw.test:8866/anthropic" || !strings.HasPrefix(stderr, "err\n") || !strings.Contains(stderr, "exited with code 7") {
		t.Fatalf("exec = exit %d, stdout %q, stderr %q; want 7 with the base URL", code, out, stderr)
	}
	if strings.Contains(stderr, "gwt.exec-test-token") {
		t.Error("stderr shows the token")
	}
	if got := admin.revoked(); len(got) != 1 || got[0] != "jti-exec" {
		t.Fatalf("revokes = %v, want [jti-exec]", got)
	}

	// The admin token from the environment instead of a file.
	code, _, stderr = runCLI(t, ctx, envMap(map[string]string{"CUSTODY_ADMIN_TOKEN": "admin-0123"}), "",
		"exec", "--sandboxd="+sd, "--admin="+admin.URL, "--log-level=debug", "--", "true")
	if code != 0 || strings.Contains(stderr, "gwt.exec-test-token") || !strings.Contains(stderr, "jti-exec") {
		t.Fatalf("exec true = exit %d, stderr %q; want 0 with jti-only logs", code, stderr)
	}

	admin.mu.Lock()
	admin.revokeStatus = http.StatusNotFound
	admin.mu.Unlock()
	code, _, stderr = runCLI(t, ctx, envMap(nil), "", append(base, "--", "true")...)
	if code != 1 || !strings.Contains(stderr, "REVOKE FAILED") || !strings.Contains(stderr, "jti-exec") || !strings.Contains(stderr, "stays valid until its expiry") {
		t.Fatalf("exec with failing revoke = exit %d, stderr %q; want exit 1 naming the jti", code, stderr)
	}
}

// TestExecRevokesOnHangup: SIGHUP (a closed terminal) reaches the process
// (as SIGTERM: all sandboxd can deliver besides SIGINT and SIGKILL), and
// custody lives to revoke the token; Go's default would have ended custody
// without revoking.
func TestExecRevokesOnHangup(t *testing.T) {
	sd := startSandboxd(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	must(t, os.WriteFile(tokenFile, []byte("admin-0123\n"), 0o600))
	admin := newExecAdmin(t, "admin-0123")
	done := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(t, context.Background(), envMap(nil), "", "exec", "--sandboxd="+sd, "--admin="+admin.URL,
			"--admin-token-file="+tokenFile, "--kill-grace=2s", "--", "sh", "-c", "trap 'exit 5' TERM; sleep 30 & wait")
		done <- code
	}()
	time.Sleep(1500 * time.Millisecond) // the process is running
	must(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	select {
	case code := <-done:
		if code != 5 {
			t.Errorf("exec after SIGHUP = exit %d, want the process's 5", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("exec did not end after SIGHUP")
	}
	if got := admin.revoked(); len(got) != 1 {
		t.Fatalf("revokes after SIGHUP = %v, want one", got)
	}
}
