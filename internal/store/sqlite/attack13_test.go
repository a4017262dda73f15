package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/signer"
)

// view is one writer's idea of the stored log.
type view struct {
	size  int64
	heads map[string]int64
}

func readView(t testing.TB, d *DB) view {
	t.Helper()
	ctx := context.Background()
	size, err := d.TreeSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := view{size: size, heads: map[string]int64{}}
	for _, r := range []string{"a", "b", "c", "d"} {
		ls, err := d.RunLeaves(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) > 0 {
			v.heads[r] = ls[len(ls)-1].RunSeq
		}
	}
	return v
}

// batchOn builds a batch of n leaves extending v (or, with skew, one
// that does not: a run_seq skipped or repeated).
func batchOn(rng *rand.Rand, v view, n int, skew int, badHash bool) *signer.Batch {
	b := &signer.Batch{}
	next := map[string]int64{}
	for r, h := range v.heads {
		next[r] = h + 1
	}
	for i := range n {
		run := string(rune('a' + rng.IntN(4)))
		seq := next[run]
		if i == 0 {
			seq += int64(skew)
		}
		idx := v.size + int64(i)
		b.Leaves = append(b.Leaves, signer.Leaf{Index: idx, Run: run, RunSeq: seq, Type: "x", Record: []byte(fmt.Sprintf("%d/%s/%d", idx, run, seq))})
		next[run] = seq + 1
		hidx := tlog.StoredHashIndex(0, idx)
		if badHash {
			hidx = 0 // taken: the transaction fails after the leaves
		}
		b.Hashes = append(b.Hashes, signer.IndexedHash{Index: hidx})
	}
	return b
}

func apply(v view, b *signer.Batch) view {
	out := view{size: v.size + int64(len(b.Leaves)), heads: map[string]int64{}}
	for r, h := range v.heads {
		out.heads[r] = h
	}
	for _, l := range b.Leaves {
		out.heads[l.Run] = l.RunSeq
	}
	return out
}

// TestAttackHeadCacheReplicas: writers on two handles of one file, each
// appending on its own (often stale) view, some batches skewed (a run_seq
// gap or repeat) and some failing after their leaves were inserted. A
// batch that does not extend the stored log must be refused with
// ErrLogConflict by the extends check (never by the unique constraint,
// never accepted); the stored log stays gapless and every run's run_seq
// contiguous.
func TestAttackHeadCacheReplicas(t *testing.T) {
	dir := t.TempDir()
	h := []*DB{openSignerTestDB(t, dir), openSignerTestDB(t, dir)}
	ctx := context.Background()
	// Hash 0 exists, so a badHash batch fails on it.
	if err := h[0].AppendBatch(ctx, &signer.Batch{Leaves: []signer.Leaf{{Index: 0, Run: "a", RunSeq: 0, Type: "x", Record: []byte("0")}},
		Hashes: []signer.IndexedHash{{Index: 0}}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	ok := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := h[w%2]
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			v := readView(t, d)
			for range 300 {
				skew := 0
				switch rng.IntN(8) {
				case 0:
					skew = 1
				case 1:
					skew = -1
				}
				bad := rng.IntN(10) == 0
				b := batchOn(rng, v, 1+rng.IntN(20), skew, bad)
				if skew == -1 && b.Leaves[0].RunSeq < 0 {
					skew = 0
					b.Leaves[0].RunSeq = 0
				}
				err := d.AppendBatch(ctx, b)
				switch {
				case err == nil:
					if skew != 0 || bad {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("writer %d: batch with skew %d bad %v accepted", w, skew, bad))
						mu.Unlock()
					}
					mu.Lock()
					ok++
					mu.Unlock()
					v = apply(v, b)
				case errors.Is(err, signer.ErrLogConflict):
					v = readView(t, d)
				case bad:
				default:
					mu.Lock()
					errs = append(errs, fmt.Sprintf("writer %d: skew %d: not refused by the extends check: %v", w, skew, err))
					mu.Unlock()
					v = readView(t, d)
				}
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	rows, err := h[0].db.QueryContext(ctx, `SELECT idx, run, run_seq FROM signer_leaves ORDER BY idx`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := int64(0)
	next := map[string]int64{}
	for rows.Next() {
		var idx, seq int64
		var run string
		if err := rows.Scan(&idx, &run, &seq); err != nil {
			t.Fatal(err)
		}
		if idx != want {
			t.Fatalf("gap: leaf %d after %d", idx, want-1)
		}
		if seq != next[run] {
			t.Fatalf("leaf %d: run %s run_seq %d, want %d", idx, run, seq, next[run])
		}
		next[run] = seq + 1
		want++
	}
	t.Logf("%d leaves, %d batches committed", want, ok)
}

// TestAttackHeadCacheSameSizeReplacement: the file's log is replaced by
// another of the same size (a backup of a different log put back, or a
// fork written by another tool) while this handle has heads cached. The
// extends check must still refuse a batch that skips run_seq in the log
// now stored.
func TestAttackHeadCacheSameSizeReplacement(t *testing.T) {
	dir := t.TempDir()
	d := openSignerTestDB(t, dir)
	other := openSignerTestDB(t, dir)
	ctx := context.Background()
	// Batches as the signer writes them: each leaf with its leaf hash.
	batch := func(ls ...signer.Leaf) *signer.Batch {
		b := &signer.Batch{Leaves: ls}
		for _, l := range ls {
			b.Hashes = append(b.Hashes, signer.IndexedHash{Index: tlog.StoredHashIndex(0, l.Index), Hash: tlog.RecordHash(l.Record)})
		}
		return b
	}
	leaf := func(i int64, run string, seq int64) signer.Leaf {
		return signer.Leaf{Index: i, Run: run, RunSeq: seq, Type: "x", Record: []byte(fmt.Sprint(i, run, seq))}
	}
	if err := d.AppendBatch(ctx, batch(leaf(0, "a", 0), leaf(1, "a", 1))); err != nil {
		t.Fatal(err)
	}
	// Another log of two leaves: run a has one.
	if _, err := other.db.ExecContext(ctx, `DELETE FROM signer_leaves; DELETE FROM signer_hashes`); err != nil {
		t.Fatal(err)
	}
	if err := other.AppendBatch(ctx, batch(leaf(0, "a", 0), leaf(1, "b", 0))); err != nil {
		t.Fatal(err)
	}
	err := d.AppendBatch(ctx, batch(leaf(2, "a", 2)))
	if !errors.Is(err, signer.ErrLogConflict) {
		t.Fatalf("a batch leaving a gap in run a (stored head 0, batch run_seq 2) = %v, want ErrLogConflict", err)
	}
}
