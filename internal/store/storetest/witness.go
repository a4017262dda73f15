package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/witness"
)

// treeRoot is a stand-in root hash for a tree of size n.
func treeRoot(n int64) tlog.Hash {
	return tlog.Hash(sha256.Sum256([]byte{byte(n), byte(n >> 8), byte(n >> 16)}))
}

const witnessOrigin = "signer.custody.example/log"

// checkTree fails t unless origin's stored tree is (size, root).
func checkTree(t testing.TB, s witness.Store, origin string, size int64, root tlog.Hash) {
	t.Helper()
	got, gotRoot, err := s.LatestTree(context.Background(), origin)
	if err != nil || got != size || gotRoot != root {
		t.Errorf("LatestTree(%q) = %d, %v, %v; want %d, %v", origin, got, gotRoot, err, size, root)
	}
}

// Witness checks a [witness.Store]: LatestTree of an unknown origin is
// (0, zero hash); CompareAndSwapTree succeeds only from the stored size,
// returning a [*witness.ConflictError] with the stored size otherwise,
// refuses a different root at the stored size with [witness.ErrFork],
// refuses a shrinking swap with an error that is neither, and leaves
// other origins alone. It runs [WitnessReplicas] on one handle.
// Each subtest calls open for a new, empty store, released when the
// testing.TB given to open ends.
func Witness(t *testing.T, open func(testing.TB) witness.Store) {
	ctx := context.Background()

	t.Run("CompareAndSwap", func(t *testing.T) {
		s := open(t)
		checkTree(t, s, witnessOrigin, 0, tlog.Hash{})
		const (
			ok = iota
			conflict
			fork
			other
		)
		steps := []struct {
			name         string
			old, new     int64
			root         tlog.Hash
			want         int
			conflictSize int64
			// the stored tree afterwards
			size     int64
			storedAt tlog.Hash
		}{
			{"unknown origin, old size ahead", 3, 5, treeRoot(5), conflict, 0, 0, tlog.Hash{}},
			{"first tree", 0, 5, treeRoot(5), ok, 0, 5, treeRoot(5)},
			{"stale old size", 0, 7, treeRoot(7), conflict, 5, 5, treeRoot(5)},
			{"old size ahead", 6, 7, treeRoot(7), conflict, 5, 5, treeRoot(5)},
			{"same tree again", 5, 5, treeRoot(5), ok, 0, 5, treeRoot(5)},
			{"fork at same size", 5, 5, treeRoot(99), fork, 0, 5, treeRoot(5)},
			{"shrink", 5, 3, treeRoot(3), other, 0, 5, treeRoot(5)},
			{"negative old size", -1, 3, treeRoot(3), other, 0, 5, treeRoot(5)},
			{"growth", 5, 9, treeRoot(9), ok, 0, 9, treeRoot(9)},
			{"growth again", 9, 1 << 40, treeRoot(1 << 40), ok, 0, 1 << 40, treeRoot(1 << 40)},
		}
		for _, c := range steps {
			err := s.CompareAndSwapTree(ctx, witnessOrigin, c.old, c.new, c.root)
			var ce *witness.ConflictError
			switch c.want {
			case ok:
				if err != nil {
					t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want nil", c.name, c.old, c.new, err)
				}
			case conflict:
				if !errors.As(err, &ce) || ce.Size != c.conflictSize || !errors.Is(err, witness.ErrConflict) {
					t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want ConflictError{%d}", c.name, c.old, c.new, err, c.conflictSize)
				}
			case fork:
				if !errors.Is(err, witness.ErrFork) || errors.Is(err, witness.ErrConflict) {
					t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want ErrFork", c.name, c.old, c.new, err)
				}
			case other:
				if err == nil || errors.Is(err, witness.ErrConflict) || errors.Is(err, witness.ErrFork) {
					t.Errorf("%s: CompareAndSwapTree(%d, %d) = %v, want an error neither conflict nor fork", c.name, c.old, c.new, err)
				}
			}
			checkTree(t, s, witnessOrigin, c.size, c.storedAt)
		}
	})

	t.Run("OriginsIndependent", func(t *testing.T) {
		s := open(t)
		const a, b = "a.example/log", "b.example/log"
		if err := s.CompareAndSwapTree(ctx, a, 0, 4, treeRoot(4)); err != nil {
			t.Fatal(err)
		}
		var ce *witness.ConflictError
		if err := s.CompareAndSwapTree(ctx, b, 4, 6, treeRoot(6)); !errors.As(err, &ce) || ce.Size != 0 {
			t.Errorf("CompareAndSwapTree(b, 4, 6) = %v, want ConflictError{0}: a's size is not b's", err)
		}
		// The same root at the same size is no fork in another log.
		if err := s.CompareAndSwapTree(ctx, b, 0, 4, treeRoot(4)); err != nil {
			t.Errorf("CompareAndSwapTree(b, 0, 4) = %v", err)
		}
		if err := s.CompareAndSwapTree(ctx, b, 4, 8, treeRoot(8)); err != nil {
			t.Errorf("CompareAndSwapTree(b, 4, 8) = %v", err)
		}
		checkTree(t, s, a, 4, treeRoot(4))
		checkTree(t, s, b, 8, treeRoot(8))
	})

	t.Run("Concurrent", func(t *testing.T) {
		s := open(t)
		WitnessReplicas(t, s, s, s, s)
	})
}

// WitnessReplicas races stores, handles on one fresh database, and checks
// the compare-and-swap: in rounds where every goroutine swaps from the
// same old size to a size of its own, exactly one wins and every other
// gets a [*witness.ConflictError] with the winner's size (the first round
// on an origin never stored); and under a free-for-all of read-then-swap
// loops, the successful swaps form one chain from 0 ending at the stored
// tree.
func WitnessReplicas(t *testing.T, stores ...witness.Store) {
	t.Helper()
	if len(stores) < 2 {
		t.Fatalf("WitnessReplicas needs at least 2 handles, got %d", len(stores))
	}
	ctx := context.Background()
	racers := 2 * len(stores)

	const rounds = 10
	old := int64(0)
	for round := range rounds {
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make([]error, racers)
		)
		for g := range racers {
			s := stores[g%len(stores)]
			next := old + 1 + int64(g)
			wg.Go(func() {
				<-start
				errs[g] = s.CompareAndSwapTree(ctx, "rounds.example/log", old, next, treeRoot(next))
			})
		}
		close(start)
		wg.Wait()
		size, root, err := stores[0].LatestTree(ctx, "rounds.example/log")
		if err != nil {
			t.Fatal(err)
		}
		wins := 0
		for g, err := range errs {
			var ce *witness.ConflictError
			switch {
			case err == nil:
				wins++
				if next := old + 1 + int64(g); size != next || root != treeRoot(next) {
					t.Errorf("round %d: swap to %d won but the stored tree is %d", round, next, size)
				}
			case errors.As(err, &ce):
				if ce.Size != size {
					t.Errorf("round %d: loser's ConflictError{%d}, want the winner's size %d", round, ce.Size, size)
				}
			default:
				t.Errorf("round %d: CompareAndSwapTree(%d, %d) = %v", round, old, old+1+int64(g), err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d of %d racing swaps from size %d won, want exactly 1", round, wins, racers, old)
		}
		old = size
	}

	var (
		mu        sync.Mutex
		successes = map[int64]int64{} // old -> new
		wg        sync.WaitGroup
	)
	for g := range racers {
		s := stores[g%len(stores)]
		wg.Go(func() {
			for i := range 20 {
				old, _, err := s.LatestTree(ctx, witnessOrigin)
				if err != nil {
					t.Error(err)
					return
				}
				next := old + 1 + int64((g+i)%3)
				err = s.CompareAndSwapTree(ctx, witnessOrigin, old, next, treeRoot(next))
				var ce *witness.ConflictError
				switch {
				case err == nil:
					mu.Lock()
					if prev, dup := successes[old]; dup {
						t.Errorf("two swaps from size %d won (to %d and %d)", old, prev, next)
					}
					successes[old] = next
					mu.Unlock()
				case errors.As(err, &ce):
					if ce.Size <= old {
						t.Errorf("ConflictError{%d} after reading size %d: the stored size went backwards", ce.Size, old)
					}
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	size, n := int64(0), 0
	for next, ok := successes[size]; ok; next, ok = successes[size] {
		size, n = next, n+1
	}
	if n != len(successes) {
		t.Errorf("successful swaps form a chain of %d from 0, want all %d", n, len(successes))
	}
	checkTree(t, stores[0], witnessOrigin, size, treeRoot(size))
}
