package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
)

// preDigestsByLeaf turns a freshly opened database back into schema 11
// (migration 7's signer_arg_digests, with its run column and index) and
// runs the given statements on it, then closes it.
func preDigestsByLeaf(t *testing.T, dir string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	db := openSignerTestDB(t, dir)
	for _, q := range append([]string{
		`DROP TABLE signer_arg_digests`,
		`DROP TABLE signer_inbox`,
		signerInboxSchema,
		`PRAGMA user_version = 11`,
	}, stmts...) {
		if _, err := db.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
}

// TestAttackMigrationMisattributedAndOrphanDigests: rows that only a bug
// could have written before migration 12 (a digest whose run is not its
// leaf's run; a digest whose leaf is not stored). The migration keeps the
// rows, but a run's digests are now found through its leaves: the first
// moves to its leaf's run, the second is found by no run. This documents
// that behaviour (it cannot arise from the signer, which writes a digest in
// the same transaction as its leaf and with the leaf's run).
func TestAttackMigrationMisattributedAndOrphanDigests(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	preDigestsByLeaf(t, dir,
		`INSERT INTO signer_leaves (idx, run, run_seq, type, record) VALUES
			(0, 'r1', 0, 'call.decided', x'00'), (1, 'r2', 0, 'call.decided', x'01')`,
		`INSERT INTO signer_arg_digests (run, idx, pos, kind, tool, digest) VALUES
			('r1', 0, 0, 'decided', 'Bash', x'01'),
			('r1', 1, 0, 'decided', 'Misattributed', x'02'),
			('r3', 7, 0, 'decided', 'Orphan', x'03')`)
	db := openSignerTestDB(t, dir)
	var n int
	if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM signer_arg_digests`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows after migration = %d, %v; want all 3 kept", n, err)
	}
	got := map[string][]string{}
	for _, run := range []string{"r1", "r2", "r3"} {
		ds, err := db.ArgDigests(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got[run] = append(got[run], d.Tool)
		}
	}
	t.Logf("after migration: %v", got)
	if len(got["r1"]) != 1 || got["r1"][0] != "Bash" || len(got["r2"]) != 1 || got["r2"][0] != "Misattributed" || len(got["r3"]) != 0 {
		t.Fatalf("after migration: %v", got)
	}
}

// TestAttackMigrationConcurrentOpen: several handles (as processes
// sharing a data directory) open a schema-11 file at once; each succeeds,
// the migration runs once, and the digests are intact.
func TestAttackMigrationConcurrentOpen(t *testing.T) {
	for round := range 5 {
		dir := t.TempDir()
		ctx := context.Background()
		preDigestsByLeaf(t, dir,
			`INSERT INTO signer_leaves (idx, run, run_seq, type, record) VALUES (0, 'r1', 0, 'call.decided', x'00')`,
			`INSERT INTO signer_arg_digests (run, idx, pos, kind, tool, digest) VALUES ('r1', 0, 0, 'decided', 'Bash', x'01')`)
		var wg sync.WaitGroup
		dbs := make([]*DB, 6)
		errs := make([]error, len(dbs))
		for i := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dbs[i], errs[i] = Open(ctx, dir)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: open %d: %v", round, i, err)
			}
			defer dbs[i].Close()
		}
		for i, db := range dbs {
			ds, err := db.ArgDigests(ctx, "r1")
			if err != nil || len(ds) != 1 || ds[0].Tool != "Bash" {
				t.Fatalf("round %d: handle %d: ArgDigests = %+v, %v", round, i, ds, err)
			}
		}
	}
}

// TestAttackMigrationFailsMidwayRollsBack: migration 12 failing after it
// dropped the old table (its RENAME refused because a view names the
// table) leaves the file at schema 11 with the old table and its rows, so
// a fixed binary can retry.
func TestAttackMigrationFailsMidwayRollsBack(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	preDigestsByLeaf(t, dir,
		`INSERT INTO signer_leaves (idx, run, run_seq, type, record) VALUES (0, 'r1', 0, 'call.decided', x'00')`,
		`INSERT INTO signer_arg_digests (run, idx, pos, kind, tool, digest) VALUES ('r1', 0, 0, 'decided', 'Bash', x'01')`,
		`CREATE VIEW digests_by_run AS SELECT run, count(*) AS n FROM signer_arg_digests GROUP BY run`)
	db, err := Open(ctx, dir)
	if err == nil {
		db.Close()
		t.Skip("the migration succeeded despite the view; nothing failed midway")
	}
	t.Logf("open: %v", err)
	raw, err := sql.Open("sqlite", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var version, n int
	var run string
	if err := raw.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil || version != 11 {
		t.Fatalf("user_version = %d, %v; want 11", version, err)
	}
	if err := raw.QueryRowContext(ctx, `SELECT count(*), min(run) FROM signer_arg_digests`).Scan(&n, &run); err != nil || n != 1 || run != "r1" {
		t.Fatalf("old table after the failed migration: %d rows run %q, %v", n, run, err)
	}
	var left int
	raw.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'signer_arg_digests_new'`).Scan(&left)
	if left != 0 {
		t.Fatal("signer_arg_digests_new left behind")
	}
	if _, err := raw.ExecContext(ctx, `DROP VIEW digests_by_run`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db = openSignerTestDB(t, dir)
	if ds, err := db.ArgDigests(ctx, "r1"); err != nil || len(ds) != 1 {
		t.Fatalf("after retry: %+v, %v", ds, err)
	}
}

// TestAttackNewerSchemaRefused: a binary whose migrations end before the
// file's schema (as one from before migration 12 opening a migrated file)
// refuses to open it rather than writing digests without their run.
func TestAttackNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	openSignerTestDB(t, dir).Close()
	saved := migrations
	migrations = migrations[:11]
	defer func() { migrations = saved }()
	db, err := Open(context.Background(), dir)
	if err == nil {
		db.Close()
		t.Fatal("an 11-migration binary opened a schema-12 file")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open: %v", err)
	}
}

// TestAttackArgDigestsPlan: a run's digests are read through the leaves'
// (run, run_seq) index and the digests' primary key, never by scanning
// either table.
func TestAttackArgDigestsPlan(t *testing.T) {
	ctx := context.Background()
	db := openSignerTestDB(t, t.TempDir())
	rows, err := db.db.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT d.idx, d.pos, d.kind, d.tool, d.digest
		FROM signer_leaves l JOIN signer_arg_digests d ON d.idx = l.idx
		WHERE l.run = ? ORDER BY d.idx, d.pos, d.kind`, "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	t.Logf("plan: %q", plan)
	for _, p := range plan {
		if strings.HasPrefix(p, "SCAN") {
			t.Fatalf("ArgDigests scans a table: %q", plan)
		}
	}
}

// TestAttackDigestsRefusedWriteNothing: a batch whose digest names a leaf
// of another run of the same batch is refused and writes nothing, and the
// handle's cached heads still let the next valid batch commit.
func TestAttackDigestsRefusedWriteNothing(t *testing.T) {
	ctx := context.Background()
	db := openSignerTestDB(t, t.TempDir())
	leaf := func(i int64, run string, seq int64) signer.Leaf {
		return signer.Leaf{Index: i, Run: run, RunSeq: seq, Type: "call.decided", Record: []byte{byte(i)}}
	}
	b := signer.Batch{
		Leaves:  []signer.Leaf{leaf(0, "r1", 0), leaf(1, "r2", 0)},
		Digests: []signer.ArgDigest{{Run: "r1", Index: 1, Kind: signer.DigestDecided, Tool: "Stolen"}},
	}
	if err := db.AppendBatch(ctx, &b); !errors.Is(err, signer.ErrLogConflict) {
		t.Fatalf("AppendBatch = %v, want ErrLogConflict", err)
	}
	var n int
	db.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM signer_leaves) + (SELECT count(*) FROM signer_arg_digests)`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d rows written by a refused batch", n)
	}
	b.Digests[0].Run = "r2"
	if err := db.AppendBatch(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if ds, err := db.ArgDigests(ctx, "r1"); err != nil || len(ds) != 0 {
		t.Fatalf("r1 = %+v, %v", ds, err)
	}
	if ds, err := db.ArgDigests(ctx, "r2"); err != nil || len(ds) != 1 {
		t.Fatalf("r2 = %+v, %v", ds, err)
	}
}

// TestAttackMigrationUnderRunningOldBinary: a process from before
// migration 12 that already has the file open (two processes sharing a
// data directory, upgraded one at a time) keeps its schema-11 statements;
// once the other process migrates the file, its digest insert (and so
// the transaction of any batch with a decision or a model call) fails
// loudly: it is never written under a wrong run.
func TestAttackMigrationUnderRunningOldBinary(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	preDigestsByLeaf(t, dir,
		`INSERT INTO signer_leaves (idx, run, run_seq, type, record) VALUES (0, 'r1', 0, 'call.decided', x'00')`)
	old, err := sql.Open("sqlite", filepath.Join(dir, FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	ins, err := old.PrepareContext(ctx, `INSERT INTO signer_arg_digests (run, idx, pos, kind, tool, digest) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	if _, err := ins.ExecContext(ctx, "r1", 0, 0, "decided", "Bash", []byte{1}); err != nil {
		t.Fatalf("old insert before the migration: %v", err)
	}
	db := openSignerTestDB(t, dir)
	_, err = ins.ExecContext(ctx, "r1", 0, 1, "requested", "Bash", []byte{2})
	t.Logf("old binary's digest insert after the migration: %v", err)
	if err == nil {
		t.Fatal("old binary's schema-11 insert succeeded on a migrated file")
	}
	if ds, err := db.ArgDigests(ctx, "r1"); err != nil || len(ds) != 1 {
		t.Fatalf("ArgDigests = %+v, %v", ds, err)
	}
}
