package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/storetest"
)

const benchCorpus = 100_000

// buildCorpus fills nsA of a fresh database with n memories of
// storetest.MemoryCorpus in one transaction and returns the database and
// the corpus, for more text.
func buildCorpus(b *testing.B, n int) (*DB, *storetest.MemoryCorpus) {
	b.Helper()
	db := openTestDB(b)
	c := storetest.NewMemoryCorpus()
	ctx := context.Background()
	start := time.Now()
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for _, m := range c.Memories(n, t0) {
			id, err := memory.NewID()
			if err != nil {
				return err
			}
			if err := db.insertMemory(ctx, tx, nsA, m, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("build corpus: %v", err)
	}
	b.Logf("built a corpus of %d memories in %v", n, time.Since(start).Round(time.Millisecond))
	return db, c
}

func BenchmarkRemember(b *testing.B) {
	db, c := buildCorpus(b, benchCorpus)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		m := memory.Memory{Kind: "note", Text: fmt.Sprintf("%s #%d", c.Text(1), i), Session: "pod-bench", CreatedAt: time.Now()}
		if i%4 == 0 {
			m.Key = fmt.Sprintf("bench-key-%d", i%64) // supersedes an earlier one
		}
		if _, err := db.RememberMemory(ctx, nsA, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecall(b *testing.B) {
	db, _ := buildCorpus(b, benchCorpus)
	ctx := context.Background()
	queries := storetest.RecallQueries()
	// The floor: the bare FTS5 match, ranked by bm25, that every keyword
	// recall must run, without the tenant/agent filter and row fetch.
	floorQ, err := db.db.PrepareContext(ctx, `SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT 10`)
	if err != nil {
		b.Fatal(err)
	}
	defer floorQ.Close()
	var lat, floor []time.Duration
	per := make([][]time.Duration, len(queries))
	i := 0
	for b.Loop() {
		q := queries[i%len(queries)]
		q.Limit = 10
		start := time.Now()
		if _, err := db.RecallMemories(ctx, nsA, q); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		lat = append(lat, d)
		per[i%len(queries)] = append(per[i%len(queries)], d)
		if m := ftsQuery(q.Text); m != "" {
			start = time.Now()
			rows, err := floorQ.QueryContext(ctx, m)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
			floor = append(floor, time.Since(start))
		}
		i++
	}
	storetest.ReportRecall(b, queries, per, lat, floor, benchCorpus)
}
