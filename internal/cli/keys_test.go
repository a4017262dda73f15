package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/keyfile"
)

// TestKeysInit: both key files are made 0600 once and never overwritten;
// the log's verifier key is printed for witnesses.
func TestKeysInit(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "keys")
	code, out, errs := runCLI(t, ctx, envMap(nil), "", "keys", "init", "--dir", dir, "--signer-origin", "custody.example/log")
	if code != 0 || !strings.Contains(out, "log verifier key: custody.example/log+") {
		t.Fatalf("keys init = %d %q %q", code, out, errs)
	}
	files := map[string][]byte{}
	for _, name := range []string{signerKeyFile, gateway.SigningKeyFile} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want mode 0600", name, fi, err)
		}
		files[name], _ = os.ReadFile(p)
	}
	if !strings.HasPrefix(string(files[signerKeyFile]), "PRIVATE+KEY+custody.example/log+") {
		t.Fatalf("signer key file does not hold a note signing key for the origin")
	}
	if _, err := keyfile.Parse(files[gateway.SigningKeyFile]); err != nil {
		t.Fatalf("gateway key: %v", err)
	}
	code, out, _ = runCLI(t, ctx, envMap(nil), "", "keys", "init", "--dir", dir, "--signer-origin", "custody.example/log")
	if code != 0 || strings.Count(out, "kept") != 2 || !strings.Contains(out, "log verifier key: custody.example/log+") {
		t.Fatalf("second keys init = %d %q, want both kept and the verifier key", code, out)
	}
	if code, _, errs := runCLI(t, ctx, envMap(nil), "", "keys", "init", "--dir", dir, "--signer-origin", "other.example/log"); code == 0 || !strings.Contains(errs, "not a log key") {
		t.Fatalf("keys init with another origin = %d %q, want a refusal", code, errs)
	}
	for name, before := range files {
		if after, _ := os.ReadFile(filepath.Join(dir, name)); string(after) != string(before) {
			t.Fatalf("%s was overwritten", name)
		}
	}
	if code, _, errs := runCLI(t, ctx, envMap(nil), "", "keys", "init"); code != 2 || !strings.Contains(errs, "--dir") {
		t.Fatalf("keys init without --dir = %d %q, want usage error", code, errs)
	}
}

// TestWitnessKeyDataDir: `witness key --data-dir` uses the key `witness
// serve --data-dir` uses (same default path), made once.
func TestWitnessKeyDataDir(t *testing.T) {
	dir := t.TempDir()
	code, out1, errs := runCLI(t, context.Background(), envMap(nil), "", "witness", "key", "--data-dir", dir, "--name", "w1.example")
	if code != 0 || !strings.HasPrefix(out1, "w1.example+") {
		t.Fatalf("witness key = %d %q %q", code, out1, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "witness-ed25519.pem")); err != nil {
		t.Fatalf("key not at witness serve's default path: %v", err)
	}
	_, out2, _ := runCLI(t, context.Background(), envMap(nil), "", "witness", "key", "--key-file", filepath.Join(dir, "witness-ed25519.pem"), "--name", "w1.example")
	if out1 != out2 {
		t.Fatalf("--data-dir and the explicit key file give different keys: %q, %q", out1, out2)
	}
}
