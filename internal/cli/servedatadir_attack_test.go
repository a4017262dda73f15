package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/keyfile"
)

// cancelOnWrite is a log writer that cancels a context at the first
// line containing marker (serve's "listening"), so a serve that should
// have refused to start is stopped without a sleep.
type cancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.marker) {
		c.cancel()
	}
	return len(p), nil
}

func (c *cancelOnWrite) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// serveUntilListening runs serve on loopback with static tokens (a file
// in dir), --plaintext=all, env and args, and stops it at its first
// "listening" line. It returns serve's exit code, whether it got as far
// as listening, and what it logged.
func serveUntilListening(t *testing.T, dir string, env map[string]string, args ...string) (int, bool, string) {
	t.Helper()
	sum := sha256.Sum256([]byte("local-dev-token-0123456789"))
	must(t, os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte("tokens:\n  - sha256: "+hex.EncodeToString(sum[:])+
		"\n    tenant: local\n    agent: dev\n    session: laptop\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logw := &cancelOnWrite{marker: "listening", cancel: cancel}
	var out bytes.Buffer
	code := runWithIO(ctx, append([]string{"serve", "--kubernetes-auth=false",
		"--static-tokens-file=" + filepath.Join(dir, "tokens.yaml"), "--listen=" + freeAddr(t), "--metrics-listen=",
		"--gateway-listen=" + freeAddr(t), "--plaintext=all"}, args...), strings.NewReader(""), &out, logw, envMap(env))
	log := logw.String()
	return code, strings.Contains(log, "listening"), log
}

// TestAttackServeWorldWritableDataDir: `custody keys init` refuses a key
// directory others can write to (privateDir), because whoever can write
// it can plant a key that is then used. `custody serve` keeps the same
// keys (the gateway token key and the signer's log key by default in
// --data-dir) and the SQLite database there. README's own example is
// --data-dir /tmp/custody-data: another local user who creates that
// directory first (mode 0777) and drops gateway-ed25519.pem in it would
// hold the key every gateway token is verified with. Serve refuses a
// data directory another user owns, and a database or key file in it
// that another user owns (checkDataDir); it still starts in a directory
// of its own that is 0777, as a Kubernetes emptyDir is.
func TestAttackServeWorldWritableDataDir(t *testing.T) {
	const other = 4242 // another user
	for _, tc := range []struct {
		name         string
		dirOwner     int // -1: this process's user
		plantedOwner int // -1: none planted
		wantRefusal  string
	}{
		{"dir of another user", other, other, "belongs to another user (uid 4242)"},
		{"key of another user", -1, other, "gateway-ed25519.pem belongs to another user (uid 4242)"},
		{"own dir 0777", -1, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.dirOwner >= 0 || tc.plantedOwner >= 0) && os.Geteuid() != 0 {
				t.Skip("needs root, to make files another user owns")
			}
			dir := t.TempDir()
			data := filepath.Join(dir, "custody-data")
			must(t, os.Mkdir(data, 0o777))
			must(t, os.Chmod(data, 0o777))
			if tc.plantedOwner >= 0 { // the other user's key, planted before custody first starts
				path := filepath.Join(data, gateway.SigningKeyFile)
				_, err := keyfile.LoadOrCreateEd25519(path)
				must(t, err)
				must(t, os.Chown(path, tc.plantedOwner, tc.plantedOwner))
			}
			if tc.dirOwner >= 0 {
				must(t, os.Chown(data, tc.dirOwner, tc.dirOwner))
			}
			code, started, log := serveUntilListening(t, dir, nil, "--data-dir="+data)
			if tc.wantRefusal == "" {
				if !started {
					t.Fatalf("serve did not start in a 0777 --data-dir of its own (as an emptyDir is); exit %d, log:\n%s", code, log)
				}
				return
			}
			if started || code == 0 {
				t.Fatalf("serve started (exit %d) on a --data-dir with %s; log:\n%s", code, tc.name, log)
			}
			if !strings.Contains(log, tc.wantRefusal) {
				t.Fatalf("serve's refusal does not say %q:\n%s", tc.wantRefusal, log)
			}
		})
	}
}
