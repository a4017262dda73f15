package sqlite

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAttackMigrationKilledMidway: a process killed (SIGKILL) while
// migration 12 copies a large signer_arg_digests leaves a file that opens
// either at schema 11 with every old row, or at schema 12 with every row:
// never a half-copied table. The child is this test binary re-run.
func TestAttackMigrationKilledMidway(t *testing.T) {
	if dir := os.Getenv("CUSTODY_ATTACK_MIGRATE_DIR"); dir != "" {
		db, err := Open(context.Background(), dir)
		if err == nil {
			db.Close()
		}
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("slow")
	}
	const rows = 400000
	ctx := context.Background()
	killedMidway := 0
	for round := range 3 {
		dir := t.TempDir()
		preDigestsByLeaf(t, dir,
			`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 399999)
			INSERT INTO signer_arg_digests (run, idx, pos, kind, tool, digest)
			SELECT 'r' || (i % 97), i, 0, 'decided', 'Bash', randomblob(32) FROM n`)
		wal := filepath.Join(dir, FileName+"-wal")
		var before int64
		if fi, err := os.Stat(wal); err == nil {
			before = fi.Size()
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestAttackMigrationKilledMidway$")
		cmd.Env = append(os.Environ(), "CUSTODY_ATTACK_MIGRATE_DIR="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once the log holds some of the copy (more each round).
		limit := before + int64(1+round*4)<<20
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if fi, err := os.Stat(wal); err == nil && fi.Size() > limit {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		werr := cmd.Wait()
		fi, _ := os.Stat(wal)
		t.Logf("round %d: child: %v (log %d bytes before, %d at the kill)", round, werr, before, fi.Size())
		raw, err := sql.Open("sqlite", filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		var version, n int
		if err := raw.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM signer_arg_digests`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		var hasRun int
		raw.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('signer_arg_digests') WHERE name = 'run'`).Scan(&hasRun)
		raw.Close()
		t.Logf("round %d: after the kill: user_version %d, %d rows, run column %v", round, version, n, hasRun == 1)
		if n != rows || (version == 11) != (hasRun == 1) || (version != 11 && version != 12) {
			t.Fatalf("round %d: after the kill: user_version %d, %d rows, run column %v", round, version, n, hasRun == 1)
		}
		if version == 11 {
			killedMidway++
		}
		db := openSignerTestDB(t, dir)
		if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM signer_arg_digests`).Scan(&n); err != nil || n != rows {
			t.Fatalf("round %d: after reopening: %d rows, %v", round, n, err)
		}
		db.Close()
	}
	t.Logf("killed before the migration committed in %d of 3 rounds", killedMidway)
}
