package postgres

// Attacks on RememberMemory's server-side timeouts (lock_timeout and
// statement_timeout from the caller's deadline, at most rememberTimeout)
// and on its detached pipeline: settings that leak to the pooled
// connection, transactions left open, edge deadlines, statement timeouts
// on the insert and during COMMIT (a deferred trigger), and other store
// operations on the same pool afterwards.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

// timeoutAttackSettings checks every pooled connection's session settings.
func timeoutAttackSettings(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	conns := db.pool.AcquireAllIdle(ctx)
	if len(conns) == 0 {
		c, err := db.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		conns = append(conns, c)
	} else {
		defer func() {
			for _, c := range conns {
				c.Release()
			}
		}()
	}
	for _, c := range conns {
		var lt, st string
		if err := c.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout')`).Scan(&lt, &st); err != nil {
			t.Fatal(err)
		}
		if lt != "0" || st != "0" {
			t.Errorf("pooled connection %d: lock_timeout %q statement_timeout %q, want 0 0", c.Conn().PgConn().PID(), lt, st)
		}
		if s := c.Conn().PgConn().TxStatus(); s != 'I' {
			t.Errorf("pooled connection %d in transaction status %c", c.Conn().PgConn().PID(), s)
		}
	}
}

// timeoutAttackOthers runs the other memory operations on db's pool.
func timeoutAttackOthers(t *testing.T, db *DB, ns memory.Namespace) {
	t.Helper()
	ctx := context.Background()
	r, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "", fmt.Sprint("other ops ", rand.Int63())))
	if err != nil {
		t.Fatalf("remember after timeouts: %v", err)
	}
	if _, err := db.RecallMemories(ctx, ns, memory.Query{Limit: 10}); err != nil {
		t.Fatalf("recall after timeouts: %v", err)
	}
	if err := db.ForgetMemory(ctx, ns, r.ID); err != nil {
		t.Fatalf("forget after timeouts: %v", err)
	}
	id := apikey.Identity{Tenant: ns.Tenant, Agent: ns.Agent, Session: "pod-a"}
	g, err := db.AcquireStateLease(ctx, ns, "plan", memory.LeaseRequest{Holder: id, TTL: time.Minute, Now: time.Now()})
	if err != nil {
		t.Fatalf("lease after timeouts: %v", err)
	}
	if _, err := db.PutWorkingState(ctx, ns, "plan", memory.PutRequest{Holder: id, Epoch: g.Epoch, IfVersion: memory.AnyVersion, Value: json.RawMessage(`{"a":1}`), Now: time.Now()}); err != nil {
		t.Fatalf("put state after timeouts: %v", err)
	}
	if _, err := db.GetWorkingState(ctx, ns, "plan"); err != nil {
		t.Fatalf("get state after timeouts: %v", err)
	}
	if err := db.ReleaseStateLease(ctx, ns, "plan", id, g.Epoch); err != nil {
		t.Fatalf("release lease after timeouts: %v", err)
	}
}

// lockNS holds ns's memory lock on a connection of its own until the
// returned func is called.
func lockNS(t *testing.T, u string, ns memory.Namespace) func() {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sqlLockNamespace, memoryLockClass, namespaceLockKey(ns)); err != nil {
		t.Fatal(err)
	}
	return func() { tx.Rollback(ctx); c.Close(ctx) }
}

// Many remembers with tiny random deadlines on a pool of one, some while
// the namespace is locked: a failed remember is never stored, settings
// do not leak, nothing is left in a transaction, and the other
// operations work afterwards.
func TestAttackTimeoutLoopPoolOne(t *testing.T) {
	db, u := rememberAttackOpen(t, 1)
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	var failed, failedStored, ok int
	for i := 0; i < 200; i++ {
		var unlock func()
		if i%4 == 0 {
			unlock = lockNS(t, u, ns)
			go func(f func()) { time.Sleep(time.Duration(rand.Intn(5)) * time.Millisecond); f() }(unlock)
		}
		d := time.Duration(rand.Intn(4000)) * time.Microsecond
		ctx, cancel := context.WithTimeout(context.Background(), d)
		text := fmt.Sprint("to ", i)
		_, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "k", text))
		cancel()
		if err != nil {
			failed++
			time.Sleep(10 * time.Millisecond)
			if rememberAttackCount(t, db, `text = $1`, []byte(text)) > 0 {
				failedStored++
				t.Logf("failed but stored (deadline %v): %v", d, err)
			}
		} else {
			ok++
		}
	}
	t.Logf("%d ok, %d failed, %d failed but stored", ok, failed, failedStored)
	if failedStored > 0 {
		t.Errorf("%d remembers that returned an error were committed", failedStored)
	}
	time.Sleep(50 * time.Millisecond)
	timeoutAttackSettings(t, db)
	rememberAttackNoOpenTx(t, db)
	rememberAttackInvariants(t, db)
	timeoutAttackOthers(t, db, ns)
	timeoutAttackSettings(t, db)
}

// Edge deadlines: passed, under 1 ms, none, and huge (capped at 10 s).
func TestAttackTimeoutEdgeDeadlines(t *testing.T) {
	db, u := rememberAttackOpen(t, 1)
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	bg := context.Background()

	ctx, cancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
	_, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "", "passed"))
	cancel()
	if err == nil || rememberAttackCount(t, db, `text = 'passed'`) != 0 {
		t.Errorf("passed deadline: err %v, stored %d", err, rememberAttackCount(t, db, `text = 'passed'`))
	}
	for i := 0; i < 50; i++ {
		ctx, cancel := context.WithTimeout(bg, time.Duration(rand.Intn(1000))*time.Microsecond)
		text := fmt.Sprint("sub-ms ", i)
		_, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "", text))
		cancel()
		if err != nil && rememberAttackCount(t, db, `text = $1`, []byte(text)) != 0 {
			t.Errorf("sub-ms deadline: failed (%v) but stored", err)
		}
	}
	if _, err := db.RememberMemory(bg, ns, rememberAttackMem("fact", "", "no deadline")); err != nil {
		t.Errorf("no deadline: %v", err)
	}
	timeoutAttackSettings(t, db)

	if testing.Short() {
		return
	}
	// Huge deadline while the lock is held for 13 s: must fail at ~10 s.
	unlock := lockNS(t, u, ns)
	go func() { time.Sleep(13 * time.Second); unlock() }()
	ctx, cancel = context.WithTimeout(bg, time.Hour)
	start := time.Now()
	_, err = db.RememberMemory(ctx, ns, rememberAttackMem("fact", "", "huge"))
	cancel()
	el := time.Since(start)
	t.Logf("huge deadline: %v after %v", err, el)
	if err == nil || el < 9*time.Second || el > 12*time.Second {
		t.Errorf("huge deadline: err %v after %v, want a lock timeout after ~10 s", err, el)
	}
	time.Sleep(4 * time.Second)
	if n := rememberAttackCount(t, db, `text = 'huge'`); n != 0 {
		t.Errorf("huge deadline: failed but stored")
	}
	timeoutAttackSettings(t, db)
	rememberAttackNoOpenTx(t, db)
	timeoutAttackOthers(t, db, ns)
}

// A statement timeout on the insert (a BEFORE trigger that sleeps) and
// during COMMIT (a deferred constraint trigger that sleeps): the remember
// fails and nothing is stored; the old memory stays active.
func TestAttackTimeoutSlowInsertAndCommit(t *testing.T) {
	for _, mode := range []string{"insert", "commit"} {
		t.Run(mode, func(t *testing.T) {
			db, _, ns, old := rememberAttackWithOld(t, 1)
			bg := context.Background()
			timeoutAttackSlowTrigger(t, db, 300*time.Millisecond, mode == "commit")
			ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
			_, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "green"))
			cancel()
			t.Logf("slow %s: %v", mode, err)
			time.Sleep(500 * time.Millisecond)
			n := rememberAttackCount(t, db, `text = 'green'`)
			if err == nil && n != 1 || err != nil && n != 0 {
				t.Errorf("slow %s: err %v, stored %d", mode, err, n)
			}
			if mode == "commit" && err == nil {
				t.Logf("slow commit: succeeded although the deferred trigger ran 300 ms past a 100 ms deadline: statement_timeout does not bound work done at COMMIT")
			}
			if err != nil && rememberAttackActive(t, db, old.ID) != 1 {
				t.Errorf("slow %s: failed but the old memory was superseded", mode)
			}
			timeoutAttackSettings(t, db)
			rememberAttackNoOpenTx(t, db)
			rememberAttackInvariants(t, db)
			if _, err := db.pool.Exec(bg, `DROP TRIGGER slow ON memories`); err != nil {
				t.Fatal(err)
			}
			timeoutAttackOthers(t, db, ns)
		})
	}
}

// timeoutAttackSlowTrigger makes each insert into db's memories sleep
// for d: in a BEFORE INSERT trigger, or, if atCommit, in a deferred
// constraint trigger, which runs during COMMIT. `DROP TRIGGER slow ON
// memories` removes it.
func timeoutAttackSlowTrigger(t *testing.T, db *DB, d time.Duration, atCommit bool) {
	t.Helper()
	ddl := fmt.Sprintf(`CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(%g); RETURN NEW; END $$;`, d.Seconds())
	if atCommit {
		ddl += `CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON memories DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow();`
	} else {
		ddl += `CREATE TRIGGER slow BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION slow();`
	}
	if _, err := db.pool.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
}

// The deferred trigger's sleep close to the deadline, so the statement
// timeout lands in and around COMMIT: a failed remember is never stored.
func TestAttackTimeoutAtCommitEdge(t *testing.T) {
	db, _ := rememberAttackOpen(t, 1)
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	bg := context.Background()
	timeoutAttackSlowTrigger(t, db, 20*time.Millisecond, true)
	var failed, failedStored, okMissing int
	for i := 0; i < 150; i++ {
		d := time.Duration(15000+rand.Intn(10000)) * time.Microsecond
		ctx, cancel := context.WithTimeout(bg, d)
		text := fmt.Sprint("edge ", i)
		_, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "k", text))
		cancel()
		n := rememberAttackCount(t, db, `text = $1`, []byte(text))
		if err != nil {
			failed++
			if n != 0 {
				failedStored++
				t.Logf("failed but stored (deadline %v): %v", d, err)
			}
		} else if n != 1 {
			okMissing++
		}
	}
	t.Logf("%d failed, %d failed but stored, %d succeeded but missing", failed, failedStored, okMissing)
	if failedStored+okMissing > 0 {
		t.Errorf("%d failed but stored, %d succeeded but missing", failedStored, okMissing)
	}
	timeoutAttackSettings(t, db)
	rememberAttackNoOpenTx(t, db)
	rememberAttackInvariants(t, db)
}

// rememberAttackNoOpenTx finds busy connections by the application_name
// rememberAttackOpen gives them: show that it sees an open transaction
// (it once filtered on a name no connection had, and so could never
// fail).
func TestAttackNoOpenTxHelperSeesConnections(t *testing.T) {
	db, _ := rememberAttackOpen(t, 2)
	ctx := context.Background()
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Exec(ctx, `ROLLBACK`); c.Release() }()
	if busy := rememberAttackBusy(t, db); len(busy) != 1 {
		t.Errorf("busy connections = %q, want the one idle in its transaction: rememberAttackNoOpenTx's check would be vacuous", busy)
	}
}

// COMMIT's own work (deferred triggers here; a synchronous-replication
// wait or a slow fsync in production) is not bounded by
// statement_timeout. When it outlasts budget+endGrace, pgx gives up on
// the connection and the remember returns an error, but the server
// finishes the COMMIT: a remember that returned an error is stored.
func TestAttackTimeoutCommitOutlastsGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~6 s")
	}
	db, _ := rememberAttackOpen(t, 1)
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	bg := context.Background()
	timeoutAttackSlowTrigger(t, db, 6*time.Second, true)
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	start := time.Now()
	_, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "", "late commit"))
	cancel()
	t.Logf("remember returned after %v: %v", time.Since(start), err)
	time.Sleep(2 * time.Second)
	if _, err := db.pool.Exec(bg, `DROP TRIGGER slow ON memories`); err != nil {
		t.Fatal(err)
	}
	n := rememberAttackCount(t, db, `text = 'late commit'`)
	t.Logf("stored: %d", n)
	if err != nil && n != 0 {
		t.Errorf("remember returned %q but was committed (%d row)", err, n)
	}
	timeoutAttackSettings(t, db)
	rememberAttackNoOpenTx(t, db)
}

// readRemember returns the "lookup and insert disagree" error (and a
// scan error of the lookup or supersede) before reading COMMIT's result,
// but COMMIT is already in the pipeline: the server commits whatever the
// transaction wrote. Simulate a write that skipped the namespace lock
// with a test-only trigger that inserts an active copy of the same hash
// just before the remember's insert: the remember returns an error, yet
// its supersede (and the copy) are committed.
func TestAttackRememberRacedByLocklessWriterRollsBack(t *testing.T) {
	db, _, ns, old := rememberAttackWithOld(t, 1)
	bg := context.Background()
	if _, err := db.pool.Exec(bg, `CREATE FUNCTION sneak() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE r memories; BEGIN
		IF pg_trigger_depth() = 1 AND NEW.text = 'green'::bytea THEN r := NEW; r.id := NEW.id + 1; INSERT INTO memories SELECT r.*; END IF;
		RETURN NEW; END $$;
		CREATE TRIGGER sneak BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION sneak();`); err != nil {
		t.Fatal(err)
	}
	_, err := db.RememberMemory(bg, ns, rememberAttackMem("pref", "color", "green"))
	t.Logf("remember: %v", err)
	if err == nil {
		t.Fatal("the sneaking trigger did not make the remember fail")
	}
	oldActive := rememberAttackActive(t, db, old.ID)
	green := rememberAttackCount(t, db, `text = 'green'`)
	if oldActive == 0 || green != 0 {
		t.Errorf("remember returned an error but its transaction was committed: old memory active %d, rows with the new text %d", oldActive, green)
	}
	timeoutAttackSettings(t, db)
	rememberAttackNoOpenTx(t, db)
}
