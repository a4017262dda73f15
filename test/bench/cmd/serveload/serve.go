package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// server is one `custody serve` started for a load run: static tokens,
// the signer on, plain HTTP on 127.0.0.1 only.
type server struct {
	cmd     *exec.Cmd
	api     string // http://127.0.0.1:PORT
	metrics string // http://127.0.0.1:PORT/metrics
	dataDir string
	tokens  []string // keys, one per client, each its own agent (exchanged at POST /v1/auth/static)
	logPath string
}

// startServer runs bin serve in dir with n static tokens (tenant "agents",
// agent "load-<i>"), on SQLite in dir/data, or on PostgreSQL at dbURL
// when it is set (with keys made by `custody keys init`).
func startServer(ctx context.Context, bin, repo, dir, dbURL string, n int) (*server, error) {
	s := &server{dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "custody.log")}
	type entry struct {
		SHA256  string `json:"sha256"`
		Tenant  string `json:"tenant"`
		Agent   string `json:"agent"`
		Session string `json:"session"`
	}
	var entries []entry
	for i := range n {
		tok := randHex(24)
		h := sha256.Sum256([]byte(tok))
		s.tokens = append(s.tokens, tok)
		entries = append(entries, entry{hex.EncodeToString(h[:]), "agents", fmt.Sprintf("load-%d", i), fmt.Sprintf("pod-%d", i)})
	}
	if err := writeJSON(filepath.Join(dir, "tokens.json"), map[string]any{"tokens": entries}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte(randHex(32)), 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s.api = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	s.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[2])
	args := []string{"serve",
		"--data-dir=" + s.dataDir,
		"--kubernetes-auth=false",
		"--static-tokens-file=" + filepath.Join(dir, "tokens.json"),
		fmt.Sprintf("--listen=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--admin-listen=127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--metrics-listen=127.0.0.1:%d", ports[2]),
		"--admin-token-file=" + filepath.Join(dir, "admin-token"),
		"--gateway-listen=",
		"--signer",
		"--policy-dir=" + filepath.Join(repo, "deploy", "base", "policies"),
		"--plaintext=all",
		"--log-level=warn",
	}
	env := os.Environ()
	if dbURL != "" {
		keys := filepath.Join(dir, "keys")
		if out, err := exec.CommandContext(ctx, bin, "keys", "init", "--dir", keys).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("custody keys init: %v: %s", err, out)
		}
		args = append(args, "--signer-key-file="+filepath.Join(keys, "signer-ed25519.pem"),
			"--gateway-signing-key="+filepath.Join(keys, "gateway-ed25519.pem"))
		env = append(env, "CUSTODY_DATABASE_URL="+dbURL)
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start custody serve: %w", err)
	}
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	for i, tok := range s.tokens {
		var key struct {
			Key string `json:"key"`
		}
		body, _ := json.Marshal(map[string]string{"token": tok})
		if err := post(ctx, hc, s.api+"/v1/auth/static", "", body, http.StatusOK, &key); err != nil {
			s.stop()
			return nil, fmt.Errorf("exchange static token: %w", err)
		}
		s.tokens[i] = key.Key
	}
	return s, nil
}

func (s *server) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		r, err := http.Get(s.api + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	log, _ := os.ReadFile(s.logPath)
	return fmt.Errorf("custody serve not ready after %s; log:\n%s", limit, tail(log, 3000))
}

func (s *server) stop() {
	if s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if len(ports) != n {
		return nil, errors.New("no free ports")
	}
	return ports, nil
}
