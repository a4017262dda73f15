package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
)

// TestAttackKeysInitDanglingGatewaySymlink: DIR/gateway-ed25519.pem is a
// dangling symlink (a Secret mount not populated yet, a key moved away).
// keys init Stat()s it (ENOENT: follows the link), then
// keyfile.LoadOrCreateEd25519: ReadFile ENOENT -> write a temp key ->
// os.Link onto the path -> EEXIST (the symlink exists) -> recurse; forever,
// generating and fsyncing a key per level. custody serve loads the gateway
// key (and witness serve its key) through the same function.
//
// keys init runs in a child process (this test binary) that is killed
// after 5 s: in process the recursion cannot be stopped and would keep
// filling the directory with temp key files for the rest of the run.
func TestAttackKeysInitDanglingGatewaySymlink(t *testing.T) {
	if d := os.Getenv("CUSTODY_ATTACK_KEYS_DIR"); d != "" {
		code, _, _ := runCLI(t, context.Background(), envMap(nil), "", "keys", "init", "--dir", d)
		os.Exit(code)
	}
	dir := t.TempDir()
	must(t, os.Symlink(filepath.Join(dir, "nowhere", "gw.pem"), filepath.Join(dir, gateway.SigningKeyFile)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAttackKeysInitDanglingGatewaySymlink$")
	cmd.Env = append(os.Environ(), "CUSTODY_ATTACK_KEYS_DIR="+dir)
	err := cmd.Run()
	if ctx.Err() != nil {
		ents, _ := os.ReadDir(dir)
		t.Fatalf("keys init with a dangling symlink at %s still running after 5 s (unbounded recursion in keyfile.LoadOrCreateEd25519); %d temp key files left in DIR", gateway.SigningKeyFile, len(ents)-2)
	}
	t.Logf("keys init exited: %v", err)
}

// TestAttackKeysInitKeepsEmptySignerKey: writeKeyFile creates the signer
// key with O_EXCL and then writes it; a failure or crash after the create
// (ENOSPC, EIO on fsync, SIGKILL) leaves an empty or partial file that it
// does not remove. A rerun of keys init then says "kept ... (exists)" and
// exits 0 without reading it; the operator ships the empty key in the
// Secret and every replica fails. The same holds for the gateway key
// (only os.Stat) and for a directory at the path.
func TestAttackKeysInitKeepsEmptySignerKey(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, signerKeyFile), nil, 0o600)) // what a failed first run leaves
	must(t, os.Mkdir(filepath.Join(dir, gateway.SigningKeyFile), 0o700))
	code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "keys", "init", "--dir", dir)
	if code == 0 {
		t.Fatalf("keys init over an empty signer key file and a directory named like the gateway key = 0 %q %q: kept both, checked neither", strings.TrimSpace(out), errs)
	}
}

// TestAttackKeysInitWorldWritableDir: --dir that already exists is used
// as it is: MkdirAll neither creates it 0700 (as the help says) nor checks
// its mode or owner. In a world-writable DIR (e.g. /tmp/keys made first by
// another local user) that user can plant signer-ed25519.pem — keys init
// says "kept" and the operator ships the planted log key, letting its
// author sign records and checkpoints — or swap the files afterwards
// (the directory is theirs).
func TestAttackKeysInitWorldWritableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	must(t, os.Mkdir(dir, 0o777))
	must(t, os.Chmod(dir, 0o777))
	code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "keys", "init", "--dir", dir)
	fi, err := os.Stat(dir)
	must(t, err)
	if code == 0 && fi.Mode().Perm()&0o022 != 0 {
		t.Fatalf("keys init wrote private keys into a world-writable directory (mode %v) without a word: %d %q %q", fi.Mode().Perm(), code, strings.TrimSpace(out), errs)
	}
}
