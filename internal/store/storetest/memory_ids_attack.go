package storetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

// memNSOtherTenant is another tenant with memNSA's agent name.
var memNSOtherTenant = memory.Namespace{Tenant: "others", Agent: "run-1"}

// MemoryIDTakenByOtherTenant checks a remember whose new ID is that of
// another tenant's memory (memory.NewID can repeat in a millisecond
// across namespaces): it is made again with another ID, the other
// tenant's memory is neither superseded nor changed nor unindexed, and
// when every ID is taken the error names neither the taken ID nor the
// other tenant nor its text, and nothing of either namespace changes.
func MemoryIDTakenByOtherTenant(t *testing.T, s memory.Store, setNewID func(next func(time.Time) (int64, error))) {
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	theirs := memRemember(t, s, memNSOtherTenant, newMem("fact", "k", "secretword of others", at))
	mine := memRemember(t, s, memNSA, newMem("fact", "k", "mine one", at))
	taken, _ := memory.ParseID(theirs.ID)

	next, _ := takenFirst(taken)
	setNewID(next)
	second := memRemember(t, s, memNSA, newMem("fact", "k", "mine two", at.Add(time.Millisecond)))
	if second.ID == theirs.ID || second.Status != memory.StatusSuperseded || second.Supersedes != mine.ID {
		t.Fatalf("remember over another tenant's ID = %+v, want a new ID superseding %s", second, mine.ID)
	}
	checkTheirs := func(when string) {
		t.Helper()
		got := memRecall(t, s, memNSOtherTenant, memory.Query{Text: "secretword", History: true})
		if len(got) != 1 || got[0].ID != theirs.ID || got[0].SupersededBy != "" || got[0].Text != "secretword of others" {
			t.Fatalf("%s: other tenant's recall = %+v, want its one active memory %s", when, got, theirs.ID)
		}
		if got := memRecall(t, s, memNSA, memory.Query{Text: "secretword", History: true}); len(got) != 0 {
			t.Fatalf("%s: nsA recall of the other tenant's word = %+v, want none", when, got)
		}
	}
	checkTheirs("after a retried remember")

	setNewID(func(time.Time) (int64, error) { return taken, nil })
	_, err := s.RememberMemory(ctx, memNSA, newMem("fact", "k", "mine three", at.Add(2*time.Millisecond)))
	if err == nil {
		t.Fatal("remember with every ID taken succeeded")
	}
	for _, leak := range []string{theirs.ID, strconv.FormatInt(taken, 10), memNSOtherTenant.Tenant, "secretword"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("remember with every ID taken: error %q names %q of another tenant", err, leak)
		}
	}
	checkTheirs("after a failed remember")
	active := memRecall(t, s, memNSA, memory.Query{})
	if len(active) != 1 || active[0].ID != second.ID {
		t.Fatalf("after a failed remember, nsA active = %+v, want only %s", active, second.ID)
	}
	if got := memRecall(t, s, memNSA, memory.Query{Text: "three", History: true}); len(got) != 0 {
		t.Fatalf("after a failed remember, recall(three) = %+v, want none", got)
	}
}

// MemoryIDRace races remembers of n namespaces of two tenants, in one
// millisecond, whose first ID is the same: one keeps it, the others are
// made again with other IDs, and every namespace holds its own memory.
func MemoryIDRace(t *testing.T, s memory.Store, setNewID func(next func(time.Time) (int64, error))) {
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	taken, err := memory.NewID(at)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		first = map[string]bool{}
	)
	setNewID(func(t time.Time) (int64, error) {
		// Each remember's first ID is taken: keyed by its (distinct)
		// CreatedAt nanoseconds, which the store passes through.
		mu.Lock()
		defer mu.Unlock()
		k := t.String()
		if !first[k] {
			first[k] = true
			return taken, nil
		}
		return memory.NewID(t)
	})
	const n = 16
	nss := make([]memory.Namespace, n)
	res := make([]memory.Remembered, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		nss[i] = memory.Namespace{Tenant: fmt.Sprintf("tenant-%d", i%2), Agent: fmt.Sprintf("race-%d", i)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = s.RememberMemory(ctx, nss[i], newMem("fact", "k", fmt.Sprintf("racer %d", i), at.Add(time.Duration(i))))
		}()
	}
	wg.Wait()
	holders := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("remember %d = %v", i, errs[i])
			continue
		}
		if res[i].ID == memory.FormatID(taken) {
			holders++
		}
		got := memRecall(t, s, nss[i], memory.Query{History: true})
		if len(got) != 1 || got[0].ID != res[i].ID || got[0].Text != fmt.Sprintf("racer %d", i) {
			t.Errorf("namespace %v holds %+v, want only its %s", nss[i], got, res[i].ID)
		}
	}
	if holders != 1 {
		t.Errorf("%d remembers kept the contested ID, want 1", holders)
	}
}
