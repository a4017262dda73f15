package postgres

// Attacks on RememberMemory's pipelined transaction: concurrent
// remembers, taken IDs, cancellation at random points (a remember that
// returns an error must not be committed), lock timeouts, bad input,
// look-alike namespaces and forgets racing remembers.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// rememberAttackOpen opens a DB of its own schema whose connections carry
// an application_name of their own, so that rememberAttackNoOpenTx sees
// only them, and returns it with its URL (without the pool size, for
// pgx.Connect). maxConns > 0 sizes the pool.
func rememberAttackOpen(t *testing.T, maxConns int) (*DB, string) {
	t.Helper()
	u := pgtest.Schema(t) + "&application_name=" + fmt.Sprintf("remember_attack_%d", rand.Int63())
	pu := u
	if maxConns > 0 {
		pu += fmt.Sprintf("&pool_max_conns=%d", maxConns)
	}
	db, err := Open(context.Background(), pu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, u
}

func rememberAttackMem(kind, key, text string) memory.Memory {
	return memory.Memory{Kind: kind, Key: key, Text: text, Session: "pod-a", CreatedAt: time.Now()}
}

// rememberAttackInvariants checks the rules of the memories table with SQL.
func rememberAttackInvariants(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	for name, q := range map[string]string{
		"two active per hash":    `SELECT count(*) FROM (SELECT 1 FROM memories WHERE superseded_by IS NULL GROUP BY tenant, agent, hash HAVING count(*) > 1) x`,
		"two active per key":     `SELECT count(*) FROM (SELECT 1 FROM memories WHERE superseded_by IS NULL AND key <> '' GROUP BY tenant, agent, kind, key HAVING count(*) > 1) x`,
		"dangling superseded_by": `SELECT count(*) FROM memories m WHERE superseded_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories n WHERE n.id = m.superseded_by AND n.tenant = m.tenant AND n.agent = m.agent)`,
		"superseded by non-key":  `SELECT count(*) FROM memories m JOIN memories n ON n.id = m.superseded_by WHERE n.kind <> m.kind OR n.key <> m.key`,
	} {
		var n int
		if err := db.pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n != 0 {
			t.Errorf("invariant broken: %s (%d)", name, n)
		}
	}
}

// rememberAttackBusy returns, from a connection of its own, the
// connections of db (by its application_name) that are not idle: in a
// transaction, or still running a statement.
func rememberAttackBusy(t *testing.T, db *DB) []string {
	t.Helper()
	ctx := context.Background()
	cfg := db.pool.Config().ConnConfig.Copy()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT pid, state, coalesce(query, '') FROM pg_stat_activity
		WHERE application_name = $1 AND state <> 'idle' AND pid <> pg_backend_pid()`, cfg.RuntimeParams["application_name"])
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var busy []string
	for rows.Next() {
		var pid int
		var state, q string
		if err := rows.Scan(&pid, &state, &q); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, fmt.Sprintf("connection %d %q (last query %q)", pid, state, q))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return busy
}

// rememberAttackNoOpenTx fails if a connection of db is not idle.
func rememberAttackNoOpenTx(t *testing.T, db *DB) {
	t.Helper()
	for _, c := range rememberAttackBusy(t, db) {
		t.Errorf("left busy: %s", c)
	}
}

func rememberAttackCount(t *testing.T, db *DB, where string, args ...any) int {
	t.Helper()
	var n int
	if err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM memories WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// rememberAttackActive returns 1 if the memory id is stored and active,
// 0 otherwise.
func rememberAttackActive(t *testing.T, db *DB, id string) int {
	t.Helper()
	return rememberAttackCount(t, db, `id = $1 AND superseded_by IS NULL`, mustID(id))
}

// rememberAttackWithOld opens a store as rememberAttackOpen does, whose
// namespace t1/a holds one active memory (pref, key color, text "blue"):
// the memory a failed remember of "green" under the same key must leave
// active.
func rememberAttackWithOld(t *testing.T, maxConns int) (*DB, string, memory.Namespace, memory.Remembered) {
	t.Helper()
	db, u := rememberAttackOpen(t, maxConns)
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	old, err := db.RememberMemory(context.Background(), ns, rememberAttackMem("pref", "color", "blue"))
	if err != nil {
		t.Fatal(err)
	}
	return db, u, ns, old
}

// Many goroutines remember the same content, and different texts under
// one key, in one namespace.
func TestAttackRememberConcurrent(t *testing.T) {
	db, _ := rememberAttackOpen(t, 0)
	ctx := context.Background()
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := map[string]int{}
	var errs []error
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				var m memory.Memory
				switch i % 3 {
				case 0:
					m = rememberAttackMem("fact", "", "same content")
				case 1:
					m = rememberAttackMem("fact", "k", "same keyed content")
				default:
					m = rememberAttackMem("fact", "k", fmt.Sprintf("text %d %d", g, i%7))
				}
				res, err := db.RememberMemory(ctx, ns, m)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if res.Status == memory.StatusCreated && m.Key == "" {
					created[m.Text]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if created["same content"] != 1 {
		t.Errorf("same content created %d times, want 1", created["same content"])
	}
	rememberAttackInvariants(t, db)
	rememberAttackNoOpenTx(t, db)
	if n := rememberAttackCount(t, db, `superseded_by IS NULL AND key = 'k'`); n != 1 {
		t.Errorf("%d active memories for key k, want 1", n)
	}
}

// takenIDs returns a newID that hands out ids first, then fresh ones.
func takenIDs(ids ...int64) func(time.Time) (int64, error) {
	var mu sync.Mutex
	return func(t time.Time) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) > 0 {
			id := ids[0]
			ids = ids[1:]
			return id, nil
		}
		return memory.NewID(t)
	}
}

// An ID taken by another tenant's memory, in the middle of a supersede.
func TestAttackRememberIDTakenMidSupersede(t *testing.T) {
	db, _ := rememberAttackOpen(t, 1) // one connection: any leaked transaction shows
	ctx := context.Background()
	t1 := memory.Namespace{Tenant: "t1", Agent: "a"}
	t2 := memory.Namespace{Tenant: "t2", Agent: "a"}
	old, err := db.RememberMemory(ctx, t1, rememberAttackMem("pref", "color", "blue"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.RememberMemory(ctx, t2, rememberAttackMem("secret", "s", "tenant two secret"))
	if err != nil {
		t.Fatal(err)
	}
	var taken int64
	fmt.Sscanf(other.ID, "%x", &taken)

	// Taken once: retried, supersedes old.
	db.newID = takenIDs(taken)
	res, err := db.RememberMemory(ctx, t1, rememberAttackMem("pref", "color", "green"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != memory.StatusSuperseded || res.Supersedes != old.ID || res.ID == other.ID {
		t.Fatalf("got %+v, want superseded of %s with a fresh id", res, old.ID)
	}
	if strings.Contains(fmt.Sprint(res), "tenant two") {
		t.Errorf("response leaks the other tenant: %+v", res)
	}
	rememberAttackInvariants(t, db)

	// Taken every time: the remember fails; the active memory stays.
	ids := make([]int64, 100)
	for i := range ids {
		ids[i] = taken
	}
	db.newID = takenIDs(ids...)
	_, err = db.RememberMemory(ctx, t1, rememberAttackMem("pref", "color", "red"))
	if err == nil {
		t.Fatal("remember with an always-taken id succeeded")
	}
	if !errors.Is(err, memory.ErrIDTaken) {
		t.Errorf("error %v, want ErrIDTaken", err)
	}
	if strings.Contains(err.Error(), "t2") || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), other.ID) {
		t.Errorf("error leaks the other tenant: %v", err)
	}
	db.newID = memory.NewID
	if n := rememberAttackCount(t, db, `tenant = 't1' AND superseded_by IS NULL AND text = 'green'`); n != 1 {
		t.Errorf("green active count %d, want 1", n)
	}
	if n := rememberAttackCount(t, db, `superseded_by = $1`, taken); n != 0 {
		t.Errorf("%d rows superseded by the other tenant's id", n)
	}
	rememberAttackInvariants(t, db)
	// the single pooled connection must be usable and not in a transaction
	for i := 0; i < 20; i++ {
		if _, err := db.RememberMemory(ctx, t1, rememberAttackMem("fact", "", fmt.Sprint("after ", i))); err != nil {
			t.Fatalf("remember after failure: %v", err)
		}
	}
	if _, err := db.RecallMemories(ctx, t1, memory.Query{Text: "after", Limit: 5}); err != nil {
		t.Fatalf("recall after failure: %v", err)
	}
	rememberAttackNoOpenTx(t, db)
}

// Cancellation at random points of the pipeline.
func TestAttackRememberCancelLoop(t *testing.T) {
	db, _ := rememberAttackOpen(t, 2)
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	var failedButStored, failed int
	for i := 0; i < 300; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		d := time.Duration(rand.Intn(1500)) * time.Microsecond
		go func() { time.Sleep(d); cancel() }()
		text := fmt.Sprint("cancel ", i)
		_, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "k", text))
		cancel()
		if err != nil {
			failed++
			if rememberAttackCount(t, db, `text = $1`, []byte(text)) > 0 {
				failedButStored++
			}
		}
	}
	t.Logf("cancelled: %d failed, %d of them stored anyway", failed, failedButStored)
	if failedButStored > 0 {
		// Before 76a24ae (one statement per round trip) this was 0 of 300:
		// the statements after the cancel were never sent. Now the whole
		// pipeline, COMMIT included, is on the server when pgx's cancel
		// request lands, so a cancel between statements commits anyway.
		t.Errorf("%d of %d remembers that returned an error were committed", failedButStored, failed)
	}
	rememberAttackInvariants(t, db)
	time.Sleep(200 * time.Millisecond)
	rememberAttackNoOpenTx(t, db)
	if _, err := db.RememberMemory(context.Background(), ns, rememberAttackMem("fact", "k", "final")); err != nil {
		t.Fatal(err)
	}
	if n := rememberAttackCount(t, db, `superseded_by IS NULL AND key = 'k'`); n != 1 {
		t.Errorf("%d active for key k", n)
	}
}

// A remember that times out while waiting for the namespace lock returns an
// error; it must not be committed later, when the lock is free.
func TestAttackRememberTimeoutWhileLockedCommitsLater(t *testing.T) {
	db, u, ns, old := rememberAttackWithOld(t, 0)
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, memoryLockClass, "2:t1/a"); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = db.RememberMemory(tctx, ns, rememberAttackMem("pref", "color", "green"))
	cancel()
	if err == nil {
		t.Fatal("remember succeeded while the namespace was locked")
	}
	t.Logf("remember failed as expected: %v", err)
	time.Sleep(200 * time.Millisecond)
	tx.Rollback(ctx) // free the lock
	time.Sleep(500 * time.Millisecond)
	if n := rememberAttackCount(t, db, `text = 'green'`); n != 0 {
		t.Errorf("the remember that returned %q was committed after the lock was freed (%d row); old active: %d",
			err, n, rememberAttackActive(t, db, old.ID))
	}
	rememberAttackInvariants(t, db)
}

func mustID(s string) int64 {
	var id int64
	fmt.Sscanf(s, "%x", &id)
	return id
}

// Bad input: an error, nothing written, the pool still clean.
func TestAttackRememberBadInput(t *testing.T) {
	db, _ := rememberAttackOpen(t, 1)
	ctx := context.Background()
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	if _, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "blue")); err != nil {
		t.Fatal(err)
	}
	cases := map[string]memory.Memory{
		"invalid utf8 kind": rememberAttackMem("p\xffref", "color", "x"),
		"nul kind":          rememberAttackMem("pref\x00", "color", "x"),
		"nul session":       {Kind: "pref", Key: "color", Text: "nul session", Session: "a\x00b", CreatedAt: time.Now()},
		"invalid utf8 tag":  {Kind: "pref", Key: "color", Text: "bad tag", Tags: []string{"\xff"}, Session: "s", CreatedAt: time.Now()},
		"huge text":         rememberAttackMem("pref", "color", strings.Repeat("word ", 600000)),
		"huge unique text": rememberAttackMem("pref", "color", func() string {
			var b strings.Builder
			for i := 0; b.Len() < 3<<20; i++ {
				fmt.Fprintf(&b, "w%d ", i)
			}
			return b.String()
		}()),
		"empty kind":        rememberAttackMem("", "color", "empty kind"),
		"invalid utf8 text": rememberAttackMem("pref", "color", "bad \xff text"),
		"nul text":          rememberAttackMem("pref", "color", "nul \x00 text"),
		"invalid utf8 key":  rememberAttackMem("pref", "col\xffor", "bad key"),
		"zero time":         {Kind: "pref", Key: "color", Text: "zero time", Session: "s"},
	}
	for name, m := range cases {
		res, err := db.RememberMemory(ctx, ns, m)
		t.Logf("%s: status=%s err=%v", name, res.Status, truncErr(err))
		rememberAttackNoOpenTx(t, db)
		if _, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", "", "probe "+name)); err != nil {
			t.Errorf("%s: next remember fails: %v", name, err)
		}
	}
	if n := rememberAttackCount(t, db, `kind = 'pref' AND key = 'color' AND superseded_by IS NULL`); n != 1 {
		t.Errorf("%d active color memories", n)
	}
	rememberAttackInvariants(t, db)
	rememberAttackNoOpenTx(t, db)
}

func truncErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// Same content in two tenants (and two agents): all created, no cross-talk.
func TestAttackRememberCrossTenant(t *testing.T) {
	db, _ := rememberAttackOpen(t, 0)
	ctx := context.Background()
	nss := []memory.Namespace{{Tenant: "t1", Agent: "a"}, {Tenant: "t2", Agent: "a"}, {Tenant: "t1", Agent: "b"}, {Tenant: "t1/a", Agent: ""}, {Tenant: "", Agent: "t1/a"}}
	for _, ns := range nss {
		for _, m := range []memory.Memory{rememberAttackMem("fact", "", "shared"), rememberAttackMem("pref", "k", "shared keyed")} {
			res, err := db.RememberMemory(ctx, ns, m)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != memory.StatusCreated || res.Supersedes != "" {
				t.Errorf("%+v: %+v, want created", ns, res)
			}
		}
	}
	// concurrently, same content in many tenants
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := db.RememberMemory(ctx, memory.Namespace{Tenant: fmt.Sprint("c", i), Agent: "a"}, rememberAttackMem("pref", "k", "v"))
			if err != nil || res.Status != memory.StatusCreated {
				t.Errorf("tenant c%d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	rememberAttackInvariants(t, db)
}

// The new ID is the ID of the memory being superseded, or of the active
// duplicate itself.
func TestAttackRememberIDIsOwnOldOrDuplicate(t *testing.T) {
	db, _ := rememberAttackOpen(t, 1)
	ctx := context.Background()
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	old, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "blue"))
	if err != nil {
		t.Fatal(err)
	}
	db.newID = takenIDs(mustID(old.ID))
	res, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "green"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != memory.StatusSuperseded || res.Supersedes != old.ID || res.ID == old.ID {
		t.Fatalf("got %+v, want superseded of %s under a fresh id", res, old.ID)
	}
	db.newID = takenIDs(mustID(res.ID))
	again, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "green"))
	if err != nil || again.Status != memory.StatusUnchanged || again.ID != res.ID || again.Supersedes != "" {
		t.Fatalf("identical remember under the duplicate's own id: %+v %v", again, err)
	}
	// back to the first text: supersedes green
	db.newID = takenIDs(mustID(old.ID), mustID(res.ID))
	back, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "blue"))
	if err != nil || back.Status != memory.StatusSuperseded || back.Supersedes != res.ID {
		t.Fatalf("back to blue: %+v %v", back, err)
	}
	rememberAttackInvariants(t, db)
	rememberAttackNoOpenTx(t, db)
}

// Remembers race forgets of the same keyed memories.
func TestAttackRememberRaceForget(t *testing.T) {
	db, _ := rememberAttackOpen(t, 0)
	ctx := context.Background()
	ns := memory.Namespace{Tenant: "t1", Agent: "a"}
	var wg sync.WaitGroup
	ids := make(chan string, 1000)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				res, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "k", fmt.Sprint("v", i%4)))
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case ids <- res.ID:
				default:
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case id := <-ids:
				if err := db.ForgetMemory(ctx, ns, id); err != nil && !errors.Is(err, memory.ErrNotFound) {
					t.Error(err)
				}
			case <-time.After(300 * time.Millisecond):
				return
			}
		}
	}()
	wg.Wait()
	<-done
	var n int
	db.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM memories WHERE superseded_by IS NULL GROUP BY tenant, agent, hash HAVING count(*) > 1) x`).Scan(&n)
	if n != 0 {
		t.Errorf("%d duplicate active contents", n)
	}
	if c := rememberAttackCount(t, db, `superseded_by IS NULL AND key = 'k'`); c > 1 {
		t.Errorf("%d active for key k", c)
	}
	rememberAttackNoOpenTx(t, db)
}
