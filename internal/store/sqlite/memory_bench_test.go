package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/storetest"
)

// corpusCache holds, per corpus size, a database file with that many
// memories of storetest.MemoryCorpus in nsA, built once per test process
// in cacheDir and copied for each benchmark; TestMain removes cacheDir.
var corpusCache struct {
	sync.Mutex
	dir   string
	files map[int]string
}

// removeCorpusCache removes the cached corpora (called by TestMain).
func removeCorpusCache() {
	corpusCache.Lock()
	defer corpusCache.Unlock()
	if corpusCache.dir != "" {
		os.RemoveAll(corpusCache.dir)
	}
}

// openCorpus returns a database of its own holding n memories in nsA, and
// the corpus generator after them (for more text). The first call for n
// builds the corpus in one transaction, with the IDs a server gives
// (memory.NewID of each memory's creation time, so in creation order, as
// a database grown by use has them) and without ANALYZE (a server never
// runs it); later calls copy it.
func openCorpus(b *testing.B, n int) (*DB, *storetest.MemoryCorpus) {
	b.Helper()
	c := storetest.NewMemoryCorpus()
	ms := c.Memories(n, t0)
	file, err := cachedCorpus(n, ms)
	if err != nil {
		b.Fatalf("build corpus: %v", err)
	}
	dir := b.TempDir()
	if err := copyFile(file, filepath.Join(dir, FileName)); err != nil {
		b.Fatal(err)
	}
	db, err := Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db, c
}

func cachedCorpus(n int, ms []memory.Memory) (string, error) {
	corpusCache.Lock()
	defer corpusCache.Unlock()
	if f, ok := corpusCache.files[n]; ok {
		return f, nil
	}
	if corpusCache.dir == "" {
		dir, err := os.MkdirTemp("", "custody-bench-")
		if err != nil {
			return "", err
		}
		corpusCache.dir, corpusCache.files = dir, make(map[int]string)
	}
	dir := filepath.Join(corpusCache.dir, fmt.Sprint(n))
	ctx := context.Background()
	db, err := Open(ctx, dir)
	if err != nil {
		return "", err
	}
	ids := make([]int64, len(ms))
	for i := range ids {
		if ids[i], err = memory.NewID(ms[i].CreatedAt); err != nil {
			return "", err
		}
	}
	err = db.tx(ctx, func(tx *sql.Tx) error {
		for i, m := range ms {
			if err := db.insertMemory(ctx, tx, nsA, m, ids[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr // closing the last connection checkpoints the WAL into the file
	}
	if err != nil {
		return "", err
	}
	f := filepath.Join(dir, FileName)
	corpusCache.files[n] = f
	return f, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// BenchmarkRemember reports remember latency (a new memory, one in four
// with a key that supersedes an earlier one) against its floor measured
// in the same run, interleaved: a write of 512 bytes and its fsync in the
// database's directory (storetest.SyncFloor). It also reports, as
// txn-floor-x-floor and p50-x-txn-floor, where the smallest transaction a
// remember could be sits between the two (txnFloor). Untimed remembers first
// grow the write-ahead log to its working size (rememberWarmup), as in a
// server that has run a while: the first pass over a new log extends
// the file at every commit.
// rememberWarmup is how many untimed remembers BenchmarkRemember makes
// first: about 6,000 log frames at ~15 pages a remember, past the first
// automatic checkpoint (walAutocheckpoint frames), after which the log is
// rewritten in place.
const rememberWarmup = 400

func BenchmarkRemember(b *testing.B) {
	for _, n := range storetest.BenchSizes {
		b.Run(storetest.BenchSizeName(n), func(b *testing.B) {
			db, c := openCorpus(b, n)
			floor, err := storetest.NewSyncFloor(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer floor.Close()
			ctx := context.Background()
			txn, err := newTxnFloor(ctx, db)
			if err != nil {
				b.Fatal(err)
			}
			var lat, floors, txns []time.Duration
			i := 0
			remember := func() time.Duration {
				i++
				m := memory.Memory{Kind: "note", Text: fmt.Sprintf("%s #%d", c.Text(1), i), Session: "pod-remember", CreatedAt: time.Now()}
				if i%4 == 0 {
					m.Key = fmt.Sprintf("bench-key-%d", i%64) // supersedes an earlier one
				}
				start := time.Now()
				if _, err := db.RememberMemory(ctx, nsA, m); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			for range rememberWarmup {
				remember()
			}
			for b.Loop() {
				lat = append(lat, remember())
				d, err := txn.measure(ctx, fmt.Sprintf("%s #%d", c.Text(1), i))
				if err != nil {
					b.Fatal(err)
				}
				txns = append(txns, d)
				d, err = floor.Measure()
				if err != nil {
					b.Fatal(err)
				}
				floors = append(floors, d)
			}
			storetest.ReportP50Ratio(b, txns, floors, "txn-floor-x-floor")
			storetest.ReportP50Ratio(b, lat, txns, "p50-x-txn-floor")
			storetest.ReportLatency(b, lat, floors)
		})
	}
}

// txnFloor is the smallest transaction a remember could be, in the
// remember's own database and write path (DB.tx): one row of text into
// a table without indexes and its entry in a contentless FTS5 table,
// committed. It has no lookup, no supersede and none of memories'
// indexes.
type txnFloor struct {
	db       *DB
	ins, fts *sql.Stmt
}

func newTxnFloor(ctx context.Context, db *DB) (*txnFloor, error) {
	if _, err := db.db.ExecContext(ctx, `CREATE TABLE bench_txn_floor (v TEXT NOT NULL) STRICT;
		CREATE VIRTUAL TABLE bench_txn_floor_fts USING fts5(v, content = '', contentless_delete = 1,
			tokenize = 'unicode61 remove_diacritics 2')`); err != nil {
		return nil, fmt.Errorf("txn floor: %w", err)
	}
	ins, err := db.db.PrepareContext(ctx, `INSERT INTO bench_txn_floor (v) VALUES (?)`)
	if err != nil {
		return nil, fmt.Errorf("txn floor: %w", err)
	}
	fts, err := db.db.PrepareContext(ctx, `INSERT INTO bench_txn_floor_fts (rowid, v) VALUES (?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("txn floor: %w", err)
	}
	return &txnFloor{db: db, ins: ins, fts: fts}, nil
}

// measure commits one txnFloor transaction of text and returns how long
// it took.
func (f *txnFloor) measure(ctx context.Context, text string) (time.Duration, error) {
	start := time.Now()
	err := f.db.tx(ctx, func(tx *sql.Tx) error {
		r, err := tx.StmtContext(ctx, f.ins).ExecContext(ctx, text)
		if err != nil {
			return err
		}
		id, err := r.LastInsertId()
		if err != nil {
			return err
		}
		_, err = tx.StmtContext(ctx, f.fts).ExecContext(ctx, id, ftsText(text))
		return err
	})
	return time.Since(start), err
}

// BenchmarkRecall reports recall latency over storetest.RecallQueries
// against a floor measured in the same run, interleaved: the bare FTS5
// match of the same query ranked by bm25, without the namespace filter
// and row fetch.
func BenchmarkRecall(b *testing.B) {
	for _, n := range storetest.BenchSizes {
		b.Run(storetest.BenchSizeName(n), func(b *testing.B) {
			db, _ := openCorpus(b, n)
			ctx := context.Background()
			floorQ, err := db.db.PrepareContext(ctx, `SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT 10`)
			if err != nil {
				b.Fatal(err)
			}
			defer floorQ.Close()
			storetest.BenchRecall(b, n, func(q memory.Query) error {
				_, err := db.RecallMemories(ctx, nsA, q)
				return err
			}, func(q memory.Query) (bool, error) {
				m := ftsQuery(q.Text)
				if m == "" {
					return false, nil
				}
				rows, err := floorQ.QueryContext(ctx, m)
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
