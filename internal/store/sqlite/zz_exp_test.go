package sqlite

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

var pragma = os.Getenv("PRAGMA")

func BenchmarkZZExp(b *testing.B) {
	db, _, _ := buildCorpus(b, benchCorpus)
	ctx := context.Background()
	db.db.SetMaxOpenConns(1)
	if _, err := db.db.Exec(pragma); err != nil {
		b.Fatal(err)
	}
	var cs int
	db.db.QueryRow("PRAGMA cache_size").Scan(&cs)
	b.Log("cache_size", cs, pragma)
	for _, q := range []string{"postgres migration", "dark theme editor", "the user prefers"} {
		match := ftsQuery(q)
		var n int
		db.db.QueryRowContext(ctx, `SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?`, match).Scan(&n)
		full, _ := recallSQL(nsA, memory.Query{Text: q, Limit: 10})
		for _, v := range []struct{ name, sql string; args []any }{
			{"count", `SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?`, []any{match}},
			{"full", full, []any{match, "agents", "run-1", 10}},
			{"twophase", `SELECT ` + memoryColumns + ` FROM (SELECT memories_fts.rowid AS rid, bm25(memories_fts) AS score, x.created_at AS c FROM memories_fts CROSS JOIN memories x ON x.id = memories_fts.rowid WHERE memories_fts MATCH ? AND x.tenant = ? AND x.agent = ? AND x.superseded_by IS NULL ORDER BY score, c DESC, rid DESC LIMIT ?) r CROSS JOIN memories m ON m.id = r.rid ORDER BY r.score, r.c DESC, r.rid DESC`, []any{match, "agents", "run-1", 10}},
			{"ftsonly", `SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts) LIMIT 50`, []any{match}},
			{"nobm25", `SELECT m.id FROM memories_fts CROSS JOIN memories m ON m.id = memories_fts.rowid WHERE memories_fts MATCH ? AND m.tenant = ? AND m.agent = ? LIMIT 100000`, []any{match, "agents", "run-1"}},
		} {
			start := time.Now()
			const reps = 10
			for range reps {
				rows, err := db.db.QueryContext(ctx, v.sql, v.args...)
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
				}
				rows.Close()
			}
			b.Logf("%-20q matches %6d %-10s %v", q, n, v.name, time.Since(start)/reps)
		}
	}
	for b.Loop() {
	}
}
