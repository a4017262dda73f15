package sqlite

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func openTestDB(tb testing.TB) *DB {
	tb.Helper()
	db, err := Open(context.Background(), tb.TempDir())
	if err != nil {
		tb.Fatalf("Open() = %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

var (
	nsA = memory.Namespace{Tenant: "agents", Agent: "run-1"}
	t0  = time.Date(2026, 10, 12, 9, 0, 0, 0, time.UTC)
)

// TestMemoryStore runs the memory.Store conformance suite.
func TestMemoryStore(t *testing.T) {
	storetest.Memory(t, func(tb testing.TB) memory.Store { return openTestDB(tb) })
}

// TestMemoryReplicas races handles of several processes on one file.
func TestMemoryReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.MemoryReplicas(t, dbs[0], dbs[1], dbs[2])
}

func TestMemoryIDRoundTrip(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"0000000000000001", true},
		{"7fffffffffffffff", true},
		{"8000000000000000", false},
		{"0000000000000000", false},
		{"000000000000000G", false},
		{"00000000000000AB", false}, // uppercase is not the canonical form
		{"1", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id, ok := memory.ParseID(tt.in)
			if ok != tt.ok {
				t.Fatalf("memory.ParseID(%q) ok = %v, want %v", tt.in, ok, tt.ok)
			}
			if ok && memory.FormatID(id) != tt.in {
				t.Errorf("memory.FormatID(%d) = %q, want %q", id, memory.FormatID(id), tt.in)
			}
		})
	}
}

var fullScan = regexp.MustCompile(`^SCAN (m|x|memories|memory_state)( |$)`)

// TestMemoryQueryPlans checks that no memory statement scans a whole
// table: with 100k memories a scan costs tens of milliseconds.
func TestMemoryQueryPlans(t *testing.T) {
	db := openTestDB(t)
	hash := memory.ContentHash("fact", "", "x")
	type stmt struct {
		name string
		sql  string
		args []any
		want string // in the plan
	}
	stmts := []stmt{
		{"find active by hash", sqlFindActiveByHash, []any{"t", "a", hash}, "memories_active_hash"},
		{"supersede", sqlSupersede, []any{1, 1, "t", "a", "fact", "k"}, "memories_active_key"},
		{"forget", `DELETE FROM memories WHERE id = ? AND tenant = ? AND agent = ?`, []any{1, "t", "a"}, "INTEGER PRIMARY KEY"},
		{"state", `SELECT version FROM memory_state WHERE tenant = ? AND agent = ? AND name = ?`, []any{"t", "a", "n"}, "PRIMARY KEY"},
	}
	for _, tt := range []struct {
		q    memory.Query
		want string
	}{
		{memory.Query{Limit: 10}, "memories_newest"},
		{memory.Query{Kind: "fact", Limit: 10, History: true}, "memories_kind_newest"},
		// MATCH (":M"), walked newest first (192: FTS5's descending-rowid
		// flags), so the recallCap bound keeps the newest matches.
		{memory.Query{Text: "hello world", Limit: 10}, "VIRTUAL TABLE INDEX 192:M"},
		{memory.Query{Text: "世界", Kind: "fact", Limit: 10}, "VIRTUAL TABLE INDEX 192:M"},
	} {
		sql, args := recallSQL(nsA, tt.q)
		stmts = append(stmts, stmt{fmt.Sprintf("recall %+v", tt.q), sql, args, tt.want})
	}
	for _, s := range stmts {
		t.Run(s.name, func(t *testing.T) {
			rows, err := db.db.Query("EXPLAIN QUERY PLAN "+s.sql, s.args...)
			if err != nil {
				t.Fatalf("EXPLAIN QUERY PLAN = %v", err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if !strings.Contains(strings.Join(plan, "\n"), s.want) {
				t.Errorf("plan of %s = %q, want it to use %s", s.name, plan, s.want)
			}
			for _, d := range plan {
				if fullScan.MatchString(d) {
					t.Errorf("plan of %s = %q, want no full table scan", s.name, plan)
				}
			}
			t.Logf("%s: %q", s.name, plan)
		})
	}
}

func TestMemoryIDTaken(t *testing.T) {
	db := openTestDB(t)
	storetest.MemoryIDTaken(t, db, func(next func(time.Time) (int64, error)) { db.newID = next })
}
