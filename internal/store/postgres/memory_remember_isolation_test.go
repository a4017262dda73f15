package postgres

import (
	"context"
	"fmt"
	"math/rand"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/internal/store/storetest"
)

// openMode opens a schema of its own whose pool uses pgx exec mode
// (pgx's default if "") and at most maxConns connections (the default if
// 0), and whose transactions default to level
// (default_transaction_isolation, given as a startup option in the URL,
// checked), with an application_name of its own (for
// rememberAttackNoOpenTx).
func openMode(tb testing.TB, mode, level string, maxConns int) *DB {
	tb.Helper()
	u, err := url.Parse(pgtest.Schema(tb))
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c default_transaction_isolation="+strings.ReplaceAll(level, " ", `\ `))
	q.Set("application_name", fmt.Sprintf("remember_attack_%d", rand.Int63()))
	if maxConns > 0 {
		q.Set("pool_max_conns", fmt.Sprint(maxConns))
	}
	if mode != "" {
		q.Set("default_query_exec_mode", mode)
	}
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
		db := openMode(tb, "", "serializable", 0)
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
	db := openMode(t, "", "read committed", 0)
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
