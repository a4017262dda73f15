package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

// TestRecallSearchPlannedPerCall: a keyword recall is never a named
// prepared statement on the server, so PostgreSQL never switches it to a
// generic plan (see searchExecMode); recalls without text are (their
// generic plan walks memories_newest whatever the namespace), which shows
// that the check sees the connection's prepared statements.
func TestRecallSearchPlannedPerCall(t *testing.T) {
	ctx := context.Background()
	// One connection, so the statements below are its; pgx's default mode
	// (cache_statement), whatever the server URL says, so recalls without
	// text are named statements.
	db := openMode(t, "cache_statement", "read committed", 1)
	for _, text := range []string{"the user prefers dark mode", "deploys run on kubernetes", "the cafe opens at nine"} {
		if _, err := db.RememberMemory(ctx, nsA, memory.Memory{Kind: "fact", Text: text, Session: "pod-a", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 { // past the 5 custom plans after which a named statement may go generic
		for _, q := range []memory.Query{{Text: "kubernetes", Limit: 10}, {Text: "the user", Limit: 5}, {Limit: 10}} {
			ms, err := db.RecallMemories(ctx, nsA, q)
			if err != nil {
				t.Fatal(err)
			}
			if q.Text == "kubernetes" && (len(ms) != 1 || !strings.Contains(ms[0].Text, "kubernetes")) {
				t.Fatalf("recall %d of %q = %+v", i, q.Text, ms)
			}
		}
	}
	rows, err := db.pool.Query(ctx, `SELECT statement, generic_plans FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sawNewest bool
	for rows.Next() {
		var stmt string
		var generic int64
		if err := rows.Scan(&stmt, &generic); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stmt, "ts_rank") {
			t.Errorf("a keyword recall is a named prepared statement (%d generic plans): %s", generic, stmt)
		}
		if strings.Contains(stmt, "ORDER BY created_at DESC, id DESC LIMIT 10") {
			sawNewest = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !sawNewest {
		t.Error("the recall without text is not among the connection's prepared statements: the check sees nothing")
	}
}
