package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackServeEmptyDatabaseURLFallsBackToSQLite: deploy/postgres sets
// CUSTODY_DATABASE_URL from a Secret for two replicas that must share
// one database. A Secret whose url is empty (created from an empty file
// or literal, a templating slip) sets the variable to "", which applyEnv
// applies like any value: DatabaseURL "" means "SQLite in --data-dir",
// an emptyDir in that overlay. Each replica then starts alone with its
// own store: a key or gateway token revoked on one replica still works
// on the other, leases fence nothing across them, each keeps its own
// signer log, and everything is lost at the next restart. A variable
// that is set but empty for a setting whose empty value changes the
// security model must be refused (fail closed), not taken as "unset".
func TestAttackServeEmptyDatabaseURLFallsBackToSQLite(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "keys", "init", "--dir", keys); code != 0 {
		t.Fatalf("keys init = %d %s %s", code, out, errs)
	}
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
		"--gateway-listen=" + freeAddr(t), "--data-dir=" + filepath.Join(dir, "data"), "--plaintext=all",
		"--signer-key-file=" + filepath.Join(keys, signerKeyFile), "--gateway-signing-key=" + filepath.Join(keys, "gateway-ed25519.pem")},
		strings.NewReader(""), &out, logw, envMap(map[string]string{"CUSTODY_DATABASE_URL": ""}))
	if strings.Contains(logw.String(), "listening") {
		t.Fatalf("serve with CUSTODY_DATABASE_URL set but empty started on a private SQLite store (exit %d); log:\n%s", code, logw.String())
	}
	if code == 0 {
		t.Fatal("serve exit 0 with CUSTODY_DATABASE_URL set but empty")
	}
}
