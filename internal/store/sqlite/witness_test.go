package sqlite

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/witness"
)

func treeRoot(n int64) tlog.Hash { return tlog.Hash(sha256.Sum256([]byte{byte(n), byte(n >> 8)})) }

func TestWitnessTrees(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	const origin = "signer.custody.example/log"
	if size, root, err := db.LatestTree(ctx, origin); err != nil || size != 0 || root != (tlog.Hash{}) {
		t.Fatalf("LatestTree(empty) = %d, %v, %v, want 0, zero hash, nil", size, root, err)
	}
	steps := []struct {
		name          string
		old, new      int64
		root          tlog.Hash
		wantConflict  int64 // -1: no conflict
		wantFork      bool
		wantErr       bool
		wantSize      int64
		wantStoredFor tlog.Hash
	}{
		{"first tree", 0, 5, treeRoot(5), -1, false, false, 5, treeRoot(5)},
		{"stale old size", 0, 7, treeRoot(7), 5, false, false, 5, treeRoot(5)},
		{"old size ahead", 6, 7, treeRoot(7), 5, false, false, 5, treeRoot(5)},
		{"same tree again", 5, 5, treeRoot(5), -1, false, false, 5, treeRoot(5)},
		{"fork at same size", 5, 5, treeRoot(99), -1, true, false, 5, treeRoot(5)},
		{"shrink", 5, 3, treeRoot(3), -1, false, true, 5, treeRoot(5)},
		{"growth", 5, 9, treeRoot(9), -1, false, false, 9, treeRoot(9)},
		{"other log untouched", 0, 1, treeRoot(1), -1, false, false, 9, treeRoot(9)},
	}
	for _, s := range steps {
		o := origin
		if s.name == "other log untouched" {
			o = "other.example/log"
		}
		err := db.CompareAndSwapTree(ctx, o, s.old, s.new, s.root)
		var conflict *witness.ConflictError
		switch {
		case s.wantConflict >= 0:
			if !errors.As(err, &conflict) || conflict.Size != s.wantConflict || !errors.Is(err, witness.ErrConflict) {
				t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want ConflictError{%d}", s.name, s.old, s.new, err, s.wantConflict)
			}
		case s.wantFork:
			if !errors.Is(err, witness.ErrFork) {
				t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want ErrFork", s.name, s.old, s.new, err)
			}
		case s.wantErr:
			if err == nil || errors.Is(err, witness.ErrConflict) {
				t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want a non-conflict error", s.name, s.old, s.new, err)
			}
		default:
			if err != nil {
				t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want nil", s.name, s.old, s.new, err)
			}
		}
		size, root, err := db.LatestTree(ctx, origin)
		if err != nil || size != s.wantSize || root != s.wantStoredFor {
			t.Errorf("%s: LatestTree() = %d, %v, %v, want %d, %v", s.name, size, root, err, s.wantSize, s.wantStoredFor)
		}
	}
	db.Close()

	db, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if size, root, err := db.LatestTree(ctx, origin); err != nil || size != 9 || root != treeRoot(9) {
		t.Fatalf("LatestTree(after reopen) = %d, %v, %v, want 9", size, root, err)
	}
}

// TestWitnessTreesConcurrent races compare-and-swaps from many goroutines:
// every success must advance from the size it read, so the successes form
// one chain and the final size is the largest success.
func TestWitnessTreesConcurrent(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	const origin = "signer.custody.example/log"
	var (
		mu        sync.Mutex
		successes = map[int64]int64{} // old -> new
		wg        sync.WaitGroup
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				old, _, err := db.LatestTree(ctx, origin)
				if err != nil {
					t.Error(err)
					return
				}
				next := old + 1 + int64((g+i)%3)
				err = db.CompareAndSwapTree(ctx, origin, old, next, treeRoot(next))
				var conflict *witness.ConflictError
				switch {
				case err == nil:
					mu.Lock()
					if prev, dup := successes[old]; dup {
						t.Errorf("two swaps from size %d (to %d and %d)", old, prev, next)
					}
					successes[old] = next
					mu.Unlock()
				case errors.As(err, &conflict):
					if conflict.Size <= old {
						t.Errorf("conflict size %d <= size read %d", conflict.Size, old)
					}
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	// Follow the chain from 0; it must cover every success.
	size, n := int64(0), 0
	for next, ok := successes[size]; ok; next, ok = successes[size] {
		size, n = next, n+1
	}
	if n != len(successes) {
		t.Errorf("successes form a chain of %d, want all %d", n, len(successes))
	}
	got, root, err := db.LatestTree(ctx, origin)
	if err != nil || got != size || root != treeRoot(size) {
		t.Errorf("LatestTree() = %d, %v, want %d (end of chain)", got, err, size)
	}
}
