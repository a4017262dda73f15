package postgres

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/internal/store/storetest"
)

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
				id, err := memory.NewID(m.CreatedAt)
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

// corpusCache holds, per corpus size, a schema with that many memories
// of storetest.MemoryCorpus in nsA, loaded once per test process and
// shared by the benchmarks (BenchmarkRemember deletes what it adds);
// TestMain drops the schemas.
var corpusCache struct {
	sync.Mutex
	urls  map[int]string
	drops []string
}

// dropCorpusCache drops the cached schemas (called by TestMain).
func dropCorpusCache() {
	corpusCache.Lock()
	defer corpusCache.Unlock()
	if len(corpusCache.drops) == 0 {
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, name := range corpusCache.drops {
		conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
	}
}

// openCorpus returns a database holding n memories in nsA (shared with
// the other benchmarks of this process) and the corpus generator after
// them.
func openCorpus(b *testing.B, n int) (*DB, *storetest.MemoryCorpus) {
	b.Helper()
	c := storetest.NewMemoryCorpus()
	ms := c.Memories(n, t0)
	ctx := context.Background()
	corpusCache.Lock()
	defer corpusCache.Unlock()
	u, ok := corpusCache.urls[n]
	if !ok {
		conn, err := pgx.Connect(ctx, pgtest.ServerURL())
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("custody_bench_%d_%d", n, time.Now().UnixNano())
		_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
		conn.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		corpusCache.drops = append(corpusCache.drops, name)
		pu, err := url.Parse(pgtest.ServerURL())
		if err != nil {
			b.Fatal(err)
		}
		qv := pu.Query()
		qv.Set("search_path", name)
		pu.RawQuery = qv.Encode()
		u = pu.String()
	}
	db, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if !ok {
		loadMemories(b, db, nsA, ms)
		if corpusCache.urls == nil {
			corpusCache.urls = make(map[int]string)
		}
		corpusCache.urls[n] = u
	}
	return db, c
}

// BenchmarkRemember reports remember latency (a new memory, one in four
// with a key that supersedes an earlier one) against its floor measured
// in the same run, interleaved: the commit of a one-row insert of 512
// bytes into a table without indexes (a round trip and the server's WAL
// flush), the least a durable remember costs.
func BenchmarkRemember(b *testing.B) {
	for _, n := range storetest.BenchSizes {
		b.Run(storetest.BenchSizeName(n), func(b *testing.B) {
			db, c := openCorpus(b, n)
			ctx := context.Background()
			if _, err := db.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_floor (v bytea)`); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				db.pool.Exec(ctx, `DELETE FROM memories WHERE session = 'pod-remember'`)
				db.pool.Exec(ctx, `DROP TABLE bench_floor`)
			})
			payload := make([]byte, 512)
			var lat, floors []time.Duration
			i := 0
			for b.Loop() {
				i++
				m := memory.Memory{Kind: "note", Text: fmt.Sprintf("%s #%d", c.Text(1), i), Session: "pod-remember", CreatedAt: time.Now()}
				if i%4 == 0 {
					m.Key = fmt.Sprintf("bench-key-%d", i%64) // supersedes an earlier one
				}
				start := time.Now()
				if _, err := db.RememberMemory(ctx, nsA, m); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				start = time.Now()
				if _, err := db.pool.Exec(ctx, `INSERT INTO bench_floor (v) VALUES ($1)`, payload); err != nil {
					b.Fatal(err)
				}
				floors = append(floors, time.Since(start))
			}
			storetest.ReportLatency(b, lat, floors)
		})
	}
}

// BenchmarkRecall reports recall latency over storetest.RecallQueries
// beside a floor measured in the same run: the bare tsvector @@ tsquery
// match ranked by ts_rank, through the GIN index, without the namespace
// filter and row fetch, for the same tsquery.
func BenchmarkRecall(b *testing.B) {
	for _, n := range storetest.BenchSizes {
		b.Run(storetest.BenchSizeName(n), func(b *testing.B) {
			db, _ := openCorpus(b, n)
			ctx := context.Background()
			const floorSQL = `SELECT id FROM memories WHERE terms @@ $1::tsquery ORDER BY ts_rank(terms, $1::tsquery) DESC LIMIT 10`
			storetest.BenchRecall(b, n, func(q memory.Query) error {
				_, err := db.RecallMemories(ctx, nsA, q)
				return err
			}, func(q memory.Query) (bool, error) {
				tsq := memoryQuery(q.Text)
				if tsq == "" {
					return false, nil
				}
				rows, err := db.pool.Query(ctx, floorSQL, tsq)
				if err != nil {
					return false, err
				}
				for rows.Next() {
				}
				rows.Close()
				return true, rows.Err()
			})
		})
	}
}
