package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/storetest"
)

const benchCorpus = 100_000

// loadMemories inserts ms into ns of db in one transaction, pipelined in
// batches of 1000, and analyzes the table (as autovacuum would) so that
// the planner knows its size.
func loadMemories(tb testing.TB, db *DB, ns memory.Namespace, ms []memory.Memory) {
	tb.Helper()
	ctx := context.Background()
	start := time.Now()
	n := len(ms)
	err := db.tx(ctx, func(tx pgx.Tx) error {
		for len(ms) > 0 {
			var batch pgx.Batch
			for _, m := range ms[:min(len(ms), 1000)] {
				id, err := memory.NewID()
				if err != nil {
					return err
				}
				args, err := memoryInsertArgs(ns, m, id)
				if err != nil {
					return err
				}
				batch.Queue(sqlInsertMemory, args...)
			}
			ms = ms[min(len(ms), 1000):]
			if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("load memories: %v", err)
	}
	if _, err := db.pool.Exec(ctx, `ANALYZE memories`); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("loaded %d memories in %v", n, time.Since(start).Round(time.Millisecond))
}

func BenchmarkRemember(b *testing.B) {
	db := openTestDB(b)
	c := storetest.NewMemoryCorpus()
	loadMemories(b, db, nsA, c.Memories(benchCorpus, t0))
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

// BenchmarkRecall reports recall latency over storetest.RecallQueries on
// 100k memories, beside a floor measured in the same run: the bare
// tsvector @@ tsquery match ranked by ts_rank, through the GIN index,
// without the namespace filter and row fetch, for the same tsquery.
func BenchmarkRecall(b *testing.B) {
	db := openTestDB(b)
	loadMemories(b, db, nsA, storetest.NewMemoryCorpus().Memories(benchCorpus, t0))
	ctx := context.Background()
	queries := storetest.RecallQueries()
	const floorSQL = `SELECT id FROM memories WHERE terms @@ $1::tsquery ORDER BY ts_rank(terms, $1::tsquery) DESC LIMIT 10`
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
		if tsq := memoryQuery(q.Text); tsq != "" {
			start = time.Now()
			rows, err := db.pool.Query(ctx, floorSQL, tsq)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			floor = append(floor, time.Since(start))
		}
		i++
	}
	storetest.ReportRecall(b, queries, per, lat, floor, benchCorpus)
}
