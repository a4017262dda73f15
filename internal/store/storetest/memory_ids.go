package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

// MemoryIDTaken checks a store's answer to a new memory's ID being taken
// (memory.NewID can repeat within a millisecond): the remember is made
// again, whole, with another ID, and a remember whose every ID is taken
// fails and changes nothing. setNewID replaces the store's ID source
// (memory.NewID) with next.
func MemoryIDTaken(t *testing.T, s memory.Store, setNewID func(next func(time.Time) (int64, error))) {
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	first := memRemember(t, s, memNSA, newMem("fact", "k", "one", at))
	taken, ok := memory.ParseID(first.ID)
	if !ok {
		t.Fatalf("first memory's ID %q does not parse", first.ID)
	}

	next, calls := takenFirst(taken)
	setNewID(next)
	second := memRemember(t, s, memNSA, newMem("fact", "k", "two", at.Add(time.Second)))
	if second.ID == first.ID || second.Status != memory.StatusSuperseded || second.Supersedes != first.ID {
		t.Fatalf("remember over a taken ID = %+v, want a new ID superseding %s", second, first.ID)
	}
	if n := calls(); n != 2 {
		t.Errorf("ID source called %d times, want 2 (one taken, one new)", n)
	}
	hist := memRecall(t, s, memNSA, memory.Query{History: true})
	if len(hist) != 2 || hist[1].ID != first.ID || hist[1].SupersededBy != second.ID {
		t.Fatalf("history = %+v, want %s superseded by %s", hist, first.ID, second.ID)
	}

	setNewID(func(time.Time) (int64, error) { return taken, nil })
	if r, err := s.RememberMemory(ctx, memNSA, newMem("fact", "k", "three", at.Add(2*time.Second))); err == nil {
		t.Fatalf("remember with every ID taken = %+v, want an error", r)
	}
	active := memRecall(t, s, memNSA, memory.Query{})
	if len(active) != 1 || active[0].ID != second.ID || active[0].SupersededBy != "" {
		t.Fatalf("after a failed remember, active = %+v, want only %s, not superseded", active, second.ID)
	}
}

// takenFirst is an ID source that gives taken on its first call and
// memory.NewID after, and calls, how many times it was called. It is
// safe for concurrent use.
func takenFirst(taken int64) (next func(time.Time) (int64, error), calls func() int) {
	var (
		mu sync.Mutex
		n  int
	)
	next = func(t time.Time) (int64, error) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			return taken, nil
		}
		return memory.NewID(t)
	}
	calls = func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
	return next, calls
}
