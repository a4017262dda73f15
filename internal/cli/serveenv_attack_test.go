package cli

import (
	"context"
	"path/filepath"
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
	code, started, log := serveUntilListening(t, dir, map[string]string{"CUSTODY_DATABASE_URL": ""},
		"--data-dir="+filepath.Join(dir, "data"),
		"--signer-key-file="+filepath.Join(keys, signerKeyFile), "--gateway-signing-key="+filepath.Join(keys, "gateway-ed25519.pem"))
	if started {
		t.Fatalf("serve with CUSTODY_DATABASE_URL set but empty started on a private SQLite store (exit %d); log:\n%s", code, log)
	}
	if code == 0 {
		t.Fatal("serve exit 0 with CUSTODY_DATABASE_URL set but empty")
	}
}
