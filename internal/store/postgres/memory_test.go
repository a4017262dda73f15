package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/memory/terms"
	"github.com/agentcustody/custody/internal/store/storetest"
)

var (
	nsA = memory.Namespace{Tenant: "agents", Agent: "run-1"}
	t0  = time.Date(2026, 10, 12, 9, 0, 0, 0, time.UTC)
)

// TestMemoryStore runs the memory.Store conformance suite.
func TestMemoryStore(t *testing.T) {
	storetest.Memory(t, func(tb testing.TB) memory.Store { return openTestDB(tb) })
}

// TestMemoryReplicas races three pools on one schema, as three replicas.
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
		{"00000000000000AB", false},
		{"1", false},
		{"", false},
	}
	for _, tt := range tests {
		id, ok := memory.ParseID(tt.in)
		if ok != tt.ok || ok && memory.FormatID(id) != tt.in {
			t.Errorf("memory.ParseID(%q) = %d, %v, want ok %v and a round trip", tt.in, id, ok, tt.ok)
		}
	}
}

func TestMemoryTerms(t *testing.T) {
	long := strings.Repeat("é", 1500) // folds to 1500 bytes: not cut
	tests := []struct {
		name string
		m    memory.Memory
		want string
	}{
		{"text then key and tags after a gap", memory.Memory{Text: "Hello world", Key: "greeting", Tags: []string{"Tag one"}},
			"'hello':1 'world':2 'greeting':4 'tag':5 'one':6"},
		{"repeats", memory.Memory{Text: "a b a"}, "'a':1,3 'b':2"},
		{"cjk and emoji", memory.Memory{Text: "你好🎉"}, "'你':1 '好':2 'xu1f389':3"},
		{"nothing", memory.Memory{Text: "***"}, ""},
		{"long token cut", memory.Memory{Text: long}, "'" + strings.Repeat("e", 1500) + "':1"},
		{"long non-ascii token cut", memory.Memory{Text: strings.Repeat("ж", 1500)}, "'" + strings.Repeat("ж", 1023) + "':1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memoryTerms(tt.m); got != tt.want {
				t.Errorf("memoryTerms(%+v) = %.200q, want %.200q", tt.m, got, tt.want)
			}
		})
	}
	// Positions stop at 16383 and 256 per lexeme.
	got := memoryTerms(memory.Memory{Text: strings.Repeat("x ", 300) + strings.Repeat("y ", 17000) + "z"})
	if strings.Count(got, ",")+2 != 256+256 || !strings.HasSuffix(got, "'z':16383") {
		t.Errorf("memoryTerms(long text) = %d positions ...%q, want 256 of x, 256 of y, z at 16383", strings.Count(got, ",")+2, got[len(got)-40:])
	}
}

func TestMemoryQuery(t *testing.T) {
	tests := []struct{ in, want string }{
		{"cafe", "('cafe')"},
		{"dark mode", "('dark') | ('mode')"},
		{"世界 ticket-1234", "('世' <-> '界') | ('ticket' <-> '1234')"},
		{`a'b\c`, "('a' <-> 'b' <-> 'c')"},
		{`!x & y:* | (z)`, "('x') | ('y') | ('z')"},
		{"***", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := memoryQuery(tt.in); got != tt.want {
			t.Errorf("memoryQuery(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var b strings.Builder
	writeLexeme(&b, `it's a\b`)
	if got, want := b.String(), `'it''s a\\b'`; got != want {
		t.Errorf("writeLexeme(`it's a\\b`) = %s, want %s", got, want)
	}
}

// FuzzMemoryTerms checks that the server reads every tsvector and tsquery
// this package writes, and that the tsvector holds exactly the lexemes of
// terms.Tokens.
func FuzzMemoryTerms(f *testing.F) {
	for _, s := range []string{
		`"`, `'`, `''`, `\`, `\'`, `a:1`, `x:*`, `!a & b | (c <-> d)`, "你好世界", "🎉🏽", "\x00",
		"Café ΣΟΦΟΣ", "\xff", strings.Repeat("ж", 1200),
	} {
		f.Add(s)
	}
	db := openTestDB(f)
	f.Fuzz(func(t *testing.T, s string) {
		ctx := context.Background()
		var lexemes []string
		if err := db.pool.QueryRow(ctx, `SELECT tsvector_to_array($1::tsvector)`, memoryTerms(memory.Memory{Text: s})).Scan(&lexemes); err != nil {
			t.Fatalf("tsvector of %q: %v", s, err)
		}
		var want []string
		for _, tok := range terms.Tokens(s) {
			want = append(want, lexeme(tok))
		}
		slices.Sort(want)
		want = slices.Compact(want)
		slices.Sort(lexemes)
		if !slices.Equal(lexemes, want) {
			t.Errorf("tsvector of %q holds %q, want %q", s, lexemes, want)
		}
		if q := memoryQuery(s); q != "" {
			var ok bool
			if err := db.pool.QueryRow(ctx, `SELECT $1::tsvector @@ $2::tsquery`, memoryTerms(memory.Memory{Text: s}), q).Scan(&ok); err != nil {
				t.Fatalf("tsquery of %q: %v", s, err)
			}
			if !ok {
				t.Errorf("text %q does not match its own query %s", s, q)
			}
		}
	})
}

// TestMemoryQueryPlans checks that each memory statement uses its index
// on a table of some thousands of memories (sequential scans off, so that
// a plan that cannot use the index shows).
func TestMemoryQueryPlans(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	loadMemories(t, db, nsA, storetest.NewMemoryCorpus().Memories(3000, t0))
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	type stmt struct {
		name string
		sql  string
		args []any
		want string
	}
	stmts := []stmt{
		{"find active by hash", sqlFindActiveByHash, []any{nsA.Tenant, nsA.Agent, []byte("h")}, "memories_active_hash"},
		{"supersede", sqlSupersede, []any{1, t0, nsA.Tenant, nsA.Agent, "fact", []byte("k"), []byte("h")}, "memories_active_key"},
		{"forget", sqlForget, []any{1, nsA.Tenant, nsA.Agent}, "memories_pkey"},
		{"state", `SELECT version FROM memory_state WHERE tenant = $1 AND agent = $2 AND name = $3`, []any{"t", "a", "n"}, "memory_state_pkey"},
	}
	for _, tt := range []struct {
		q    memory.Query
		want string
	}{
		{memory.Query{Limit: 10}, "memories_newest"},
		{memory.Query{Kind: "fact", Limit: 10, History: true}, "memories_kind_newest"},
		{memory.Query{Text: "kubernetes postgres", Limit: 10}, "memories_terms"},
		{memory.Query{Text: "世界", Kind: "fact", Limit: 10}, "memories_terms"},
	} {
		sql, args := recallSQL(nsA, tt.q, searchExecMode)
		stmts = append(stmts, stmt{fmt.Sprintf("recall %+v", tt.q), sql, args, tt.want})
	}
	for _, s := range stmts {
		t.Run(s.name, func(t *testing.T) {
			rows, err := conn.Query(ctx, "EXPLAIN "+s.sql, s.args...)
			if err != nil {
				t.Fatalf("EXPLAIN = %v", err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if p := strings.Join(plan, "\n"); !strings.Contains(p, s.want) || strings.Contains(p, "Seq Scan") {
				t.Errorf("plan of %s =\n%s\nwant it to use %s without a sequential scan", s.name, p, s.want)
			}
		})
	}
}

// FuzzRecallQuery checks that no query text is a tsquery syntax error.
func FuzzRecallQuery(f *testing.F) {
	for _, s := range []string{
		`"`, `AND(`, `NEAR(a b, 2)`, `a OR`, `*`, `^start`, `-x`, `{text meta}: y`, `text:x`, `'`, `)`, `""""`,
		`a + b`, "tab\there", "世界 AND", "\x00", "🎉*", `\"`, `a & b`, `a | b`, `!a`, `a <-> b`, `a <2> b`, `x:*`, `x:AB`, `'a':1`, `\`,
	} {
		f.Add(s)
	}
	db := openTestDB(f)
	ns := memory.Namespace{Tenant: "t", Agent: "a"}
	if _, err := db.RememberMemory(context.Background(), ns, memory.Memory{Kind: "fact", Text: "something to find", Session: "p", CreatedAt: time.Now()}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if _, err := db.RecallMemories(context.Background(), ns, memory.Query{Text: q, Limit: 10}); err != nil {
			t.Errorf("RecallMemories(%q) = %v, want no error", q, err)
		}
	})
}

func TestMemoryIDTaken(t *testing.T) {
	db := openTestDB(t)
	storetest.MemoryIDTaken(t, db, func(next func(time.Time) (int64, error)) { db.newID = next })
}
