package postgres

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/internal/store/storetest"
)

// openDefaultIsolation opens a schema whose connections' transactions
// default to level (default_transaction_isolation, given as a startup
// option in the URL).
func openDefaultIsolation(tb testing.TB, level string) *DB {
	tb.Helper()
	u, err := url.Parse(pgtest.Schema(tb))
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c default_transaction_isolation="+strings.ReplaceAll(level, " ", `\ `))
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no "+" as a space
	db, err := Open(context.Background(), u.String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	var got string
	if err := db.pool.QueryRow(context.Background(), `SHOW default_transaction_isolation`).Scan(&got); err != nil || got != level {
		tb.Fatalf("default_transaction_isolation = %q, %v; want %q", got, err, level)
	}
	return db
}

// TestMemoryStoreSerializableDefault: on a server whose transactions
// default to serializable, a remember cannot run in the pipeline's
// implicit transaction (it must be read committed); the first one
// switches the DB to explicit BEGIN ISOLATION LEVEL READ COMMITTED, and
// the conformance suite passes.
func TestMemoryStoreSerializableDefault(t *testing.T) {
	var (
		mu  sync.Mutex
		dbs []*DB
	)
	t.Cleanup(func() { // after the suite's parallel subtests
		switched := 0
		for _, db := range dbs {
			if db.explicitRemember.Load() {
				switched++
			}
		}
		if switched == 0 {
			t.Errorf("no DB of the suite switched to explicit transactions: the isolation check never fired")
		}
	})
	storetest.Memory(t, func(tb testing.TB) memory.Store {
		db := openDefaultIsolation(tb, "serializable")
		mu.Lock()
		dbs = append(dbs, db)
		mu.Unlock()
		return db
	})
}

// TestRememberImplicitUnderReadCommitted: where transactions default to
// read committed, remembers stay in the pipeline's implicit transaction,
// whatever they do (create, supersede, unchanged).
func TestRememberImplicitUnderReadCommitted(t *testing.T) {
	db := openDefaultIsolation(t, "read committed")
	ctx := context.Background()
	for i, m := range []memory.Memory{
		{Kind: "pref", Key: "color", Text: "blue"},
		{Kind: "pref", Key: "color", Text: "green"},
		{Kind: "pref", Key: "color", Text: "green"},
	} {
		m.Session, m.CreatedAt = "pod-a", time.Now()
		res, err := db.RememberMemory(ctx, nsA, m)
		if err != nil {
			t.Fatal(err)
		}
		if want := []memory.Status{memory.StatusCreated, memory.StatusSuperseded, memory.StatusUnchanged}[i]; res.Status != want {
			t.Errorf("remember %d: status %v, want %v", i, res.Status, want)
		}
	}
	if db.explicitRemember.Load() {
		t.Error("remembers under read committed switched to explicit transactions")
	}
}
