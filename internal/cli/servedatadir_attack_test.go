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

// TestAttackServeWorldWritableDataDir: `custody keys init` refuses a key
// directory others can write to (privateDir), because whoever can write
// it can plant a key that is then used. `custody serve` keeps the same
// keys — the gateway token key and the signer's log key by default in
// --data-dir — and the SQLite database there, but checks nothing about
// the directory: sqlite.Open's MkdirAll(dir, 0700) leaves an existing
// directory's mode and owner as they are, and keyfile.LoadOrCreateEd25519
// / the signer read whatever key file is there. README's own example is
// --data-dir /tmp/custody-data: another local user who creates that
// directory first (mode 0777) and drops gateway-ed25519.pem in it holds
// the key every gateway token is verified with. Serve must refuse such a
// directory, as keys init does.
func TestAttackServeWorldWritableDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "custody-data")
	must(t, os.Mkdir(data, 0o777))
	must(t, os.Chmod(data, 0o777))
	// The other user's key, planted before custody first starts.
	planted, err := keyfile.LoadOrCreateEd25519(filepath.Join(data, gateway.SigningKeyFile))
	must(t, err)

	token := "local-dev-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	must(t, os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte("tokens:\n  - sha256: "+hex.EncodeToString(sum[:])+
		"\n    tenant: local\n    agent: dev\n    session: laptop\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logw := &cancelOnWrite{marker: "listening", cancel: cancel}
	var out bytes.Buffer
	code := runWithIO(ctx, []string{"serve", "--kubernetes-auth=false",
		"--static-tokens-file=" + filepath.Join(dir, "tokens.yaml"), "--listen=" + freeAddr(t), "--metrics-listen=",
		"--gateway-listen=" + freeAddr(t), "--data-dir=" + data, "--plaintext=all"}, strings.NewReader(""), &out, logw, envMap(nil))
	stillPlanted, err := keyfile.LoadOrCreateEd25519(filepath.Join(data, gateway.SigningKeyFile))
	must(t, err)
	if strings.Contains(logw.String(), "listening") {
		t.Fatalf("serve started on a world-writable --data-dir (mode 0777) whose gateway key another user planted (the planted key is still the one in use: %v); exit %d, log:\n%s",
			planted.Equal(stillPlanted), code, logw.String())
	}
	if code == 0 {
		t.Fatalf("serve exit 0 on a world-writable --data-dir")
	}
}
