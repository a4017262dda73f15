package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// TestAttackRecallCJKRadicalBreaksTsquery: a recall query holding a CJK
// radical such as "⼀" (U+2F00, Han script, category So) has a term
// (terms.hasToken sees a symbol) whose terms.Tokens are empty (Tokens
// takes it for a CJK character that is not a word rune and drops it), so
// memoryQuery writes "()", which PostgreSQL refuses: the agent's search
// fails with 500 "memory store unavailable" instead of returning no match.
func TestAttackRecallCJKRadicalBreaksTsquery(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	ns := memory.Namespace{Tenant: "agents", Agent: "run-1"}
	if _, err := db.RememberMemory(ctx, ns, memory.Memory{Kind: "note", Text: "the dark mode toggle", Session: "p", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"⼀", "⺀", "dark ⼀"} {
		t.Logf("memoryQuery(%q) = %q", q, memoryQuery(q))
		ms, err := db.RecallMemories(ctx, ns, memory.Query{Text: q, Limit: 10})
		if err != nil {
			t.Errorf("RecallMemories(q=%q) = %v, want no error", q, err)
			continue
		}
		if q == "dark ⼀" && len(ms) != 1 {
			t.Errorf("RecallMemories(q=%q) = %d memories, want 1", q, len(ms))
		}
	}
}

// TestAttackWriterFencingNeedsReadCommitted: appendBatch's fencing check
// (the epoch read after the append lock) is only sound if each statement
// takes a new snapshot after the lock is granted. d.tx begins with the
// server's default isolation; with default_transaction_isolation set to
// repeatable read (URL runtime parameter, ALTER DATABASE/ROLE ... SET,
// postgresql.conf) the transaction's snapshot is taken by the lock
// statement before it waits, so a stale writer that queued its append
// behind the new holder's epoch increment reads the old epoch and the old
// tree size and commits a record after the takeover.
//
// Steps: X holds the append lock; A's lease connection is killed; B takes
// the writer lock and queues on the append lock (to bump the epoch); A
// (which has not yet noticed it lost the lease) starts an append, which
// queues behind B; X lets go: B commits epoch 2, then A's append runs.
// Under read committed A is refused (ErrLogConflict); under repeatable
// read it commits.
func TestAttackWriterFencingNeedsReadCommitted(t *testing.T) {
	for _, iso := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(strings.ReplaceAll(iso, " ", "_"), func(t *testing.T) {
			u, err := url.Parse(pgtest.Schema(t))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("default_transaction_isolation", iso)
			u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
			ctx := context.Background()
			open := func() *DB {
				db, err := Open(ctx, u.String())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			dbA, dbB, dbX := open(), open(), open()

			a := acquire(t, dbA)
			if err := a.Store().AppendBatch(ctx, leafBatch(t, dbA, 0)); err != nil {
				t.Fatalf("first append by A: %v", err)
			}
			// Everything below runs well within A's first heartbeat (2 s).
			x, err := dbX.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Rollback(ctx)
			if _, err := x.Exec(ctx, appendLock, signerLockTag); err != nil {
				t.Fatal(err)
			}
			if _, err := dbX.pool.Exec(ctx, "SELECT pg_terminate_backend($1)", int64(a.PID())); err != nil {
				t.Fatal(err)
			}
			waiters := func() int {
				var n int
				dbX.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
				return n
			}
			base := waiters()
			bc := make(chan *SignerWriter, 1)
			go func() {
				w, err := dbB.AcquireSignerWriter(ctx)
				if err != nil {
					t.Error(err)
					bc <- nil
					return
				}
				bc <- w
			}()
			waitForQuick(t, "B waiting on the append lock", func() bool { return waiters() >= base+1 })
			batch := leafBatch(t, dbA, 1)
			ac := make(chan error, 1)
			go func() { ac <- a.Store().AppendBatch(ctx, batch) }()
			waitForQuick(t, "A waiting on the append lock", func() bool { return waiters() >= base+2 })
			if err := x.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			b := <-bc
			if b == nil {
				return
			}
			defer b.Release()
			aerr := <-ac
			t.Logf("isolation %s: B's epoch %d; stale A's append: %v", iso, b.Epoch(), aerr)
			if !errors.Is(aerr, signer.ErrLogConflict) {
				n, _ := dbB.TreeSize(ctx)
				t.Errorf("stale writer (epoch %d) appended after the takeover by epoch %d (tree size now %d); want ErrLogConflict",
					a.Epoch(), b.Epoch(), n)
			}
		})
	}
}

// waitForQuick is waitFor with a deadline short enough to stay within
// the writer heartbeat.
func waitForQuick(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(1500 * time.Millisecond)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAttackOpenErrorLeaksPasswordWithSlash: a password holding "/" whose
// part before it is all digits ("4242/s3cr3tPW") makes the URL parse as
// host = user name, port = the digits, database = the rest of the
// password and everything after it. Open's error names where(cfg) (host,
// port, database) and pgx's ConnectError names the database: the whole
// password ends up in the error (and the log) despite Open's promise.
func TestAttackOpenErrorLeaksPasswordWithSlash(t *testing.T) {
	const secret = "s3cr3tPW"
	_, err := Open(context.Background(), "postgres://localhost:4242/"+secret+"@db.example:5432/custody?connect_timeout=2")
	if err == nil {
		t.Fatal("Open succeeded")
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "4242") {
		t.Errorf("error quotes the password (4242/%s): %v", secret, err)
	}
}

// TestAttackMigrateRacesUnderRepeatableRead: migrate's advisory lock
// serializes replicas starting together only under read committed; with
// default_transaction_isolation = repeatable read a replica that waited
// on the lock reads the schema version from a snapshot taken before the
// first replica committed, and applies every migration again.
func TestAttackMigrateRacesUnderRepeatableRead(t *testing.T) {
	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery += "&default_transaction_isolation=repeatable%20read"
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			db, err := Open(context.Background(), u.String())
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("Open by one of 4 replicas starting together = %v", err)
		}
	}
}
