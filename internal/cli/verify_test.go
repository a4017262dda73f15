package cli

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
)

// TestVerifyReportsOnce: a refused bundle is reported once, as "FAILED:
// ..." on stdout with exit 1, not again on stderr; a missing bundle is
// exit 4 on stderr.
func TestVerifyReportsOnce(t *testing.T) {
	dir := t.TempDir()
	_, vkey, err := note.GenerateKey(rand.Reader, "custody.local/log")
	must(t, err)
	k, err := verify.NewTrustKey(vkey)
	must(t, err)
	tj, err := verify.Trust{Version: verify.TrustVersion, Log: verify.TrustLog{Origin: "custody.local/log", Keys: []verify.TrustKey{k}}}.Marshal()
	must(t, err)
	trust := filepath.Join(dir, "trust.json")
	must(t, os.WriteFile(trust, tj, 0o600))
	bundle := filepath.Join(dir, "run.bundle")
	must(t, os.WriteFile(bundle, []byte("not a bundle\n"), 0o600))

	code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "verify", bundle, "--trust", trust)
	if code != 1 || !strings.HasPrefix(out, "FAILED: ") || errs != "" {
		t.Fatalf("verify garbage = %d, stdout %q, stderr %q; want 1, FAILED on stdout only", code, out, errs)
	}
	code, out, errs = runCLI(t, context.Background(), envMap(nil), "", "verify", filepath.Join(dir, "missing"), "--trust", trust)
	if code != 4 || out != "" || !strings.Contains(errs, "read bundle") {
		t.Fatalf("verify missing = %d, stdout %q, stderr %q; want 4 on stderr", code, out, errs)
	}
}
