package storetest

import (
	"context"
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

	calls := 0
	setNewID(func(t time.Time) (int64, error) {
		calls++
		if calls == 1 {
			return taken, nil
		}
		return memory.NewID(t)
	})
	second := memRemember(t, s, memNSA, newMem("fact", "k", "two", at.Add(time.Second)))
	if second.ID == first.ID || second.Status != memory.StatusSuperseded || second.Supersedes != first.ID {
		t.Fatalf("remember over a taken ID = %+v, want a new ID superseding %s", second, first.ID)
	}
	if calls != 2 {
		t.Errorf("ID source called %d times, want 2 (one taken, one new)", calls)
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
