package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

// memoryRaces are the checks that call a store from many goroutines at
// once. Each races the handles it is given (handles on one database, or
// one handle several times) in namespace ns, which it has to itself.
var memoryRaces = []struct {
	name string
	f    func(t *testing.T, ns memory.Namespace, stores []memory.Store)
}{
	{"RememberSameKey", raceRememberSameKey},
	{"RememberSameText", raceRememberSameText},
	{"AcquireFree", raceAcquireFree},
	{"AcquireExpired", raceAcquireExpired},
	{"Put", racePut},
	{"StaleEpochAfterTakeover", raceStaleEpochAfterTakeover},
}

// MemoryReplicas races stores, handles on one fresh database (as several
// replicas or processes hold), against each other: concurrent remembers
// of one kind and key leave one active memory and an unbroken history,
// and of one text store it once; of many sessions asking for a free or
// expired lease, or taking over a live one, exactly one gets the next
// epoch; concurrent writes neither lose an update nor pass a version
// check twice; and a holder whose lease is taken over through another
// handle is fenced off from then on. [Memory] runs the same checks with
// one handle.
func MemoryReplicas(t *testing.T, stores ...memory.Store) {
	t.Helper()
	if len(stores) < 2 {
		t.Fatalf("MemoryReplicas needs at least 2 handles, got %d", len(stores))
	}
	for _, r := range memoryRaces {
		t.Run(r.name, func(t *testing.T) {
			r.f(t, memory.Namespace{Tenant: "agents", Agent: "replicas-" + r.name}, stores)
		})
	}
}

// raceHolder is the kubernetes identity of pod session in ns.
func raceHolder(ns memory.Namespace, session string) apikey.Identity {
	return apikey.Identity{Tenant: ns.Tenant, Agent: ns.Agent, Session: session, Method: "kubernetes", PodUID: "uid-" + session}
}

func racePutState(s memory.Store, ns memory.Namespace, h apikey.Identity, epoch, ifVersion int64, value string) (memory.State, error) {
	return s.PutWorkingState(context.Background(), ns, stateSlot, memory.PutRequest{
		Holder: h, Epoch: epoch, IfVersion: ifVersion, Value: json.RawMessage(value), Now: memT0,
	})
}

// raceRememberSameKey: many writers remembering new values of one kind
// and key leave exactly one active memory and an unbroken history.
func raceRememberSameKey(t *testing.T, ns memory.Namespace, stores []memory.Store) {
	const n = 12
	res := make([]memory.Remembered, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = stores[i%len(stores)].RememberMemory(context.Background(), ns,
				newMem("preference", "theme", fmt.Sprintf("theme %d", i), memT0.Add(time.Duration(i)*time.Millisecond)))
		})
	}
	wg.Wait()
	created, superseded := 0, make(map[string]bool)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("RememberMemory(theme %d) = %v", i, err)
		}
		switch res[i].Status {
		case memory.StatusCreated:
			created++
		case memory.StatusSuperseded:
			if superseded[res[i].Supersedes] {
				t.Errorf("memory %s superseded twice", res[i].Supersedes)
			}
			superseded[res[i].Supersedes] = true
		default:
			t.Errorf("RememberMemory(theme %d) = %s, want created or superseded", i, res[i].Status)
		}
	}
	if created != 1 || len(superseded) != n-1 {
		t.Errorf("statuses: %d created, %d superseded, want 1 and %d", created, len(superseded), n-1)
	}
	active := memRecall(t, stores[0], ns, memory.Query{Kind: "preference"})
	if len(active) != 1 {
		t.Fatalf("active memories = %q, want exactly one", memIDs(active))
	}
	all := memRecall(t, stores[len(stores)-1], ns, memory.Query{Kind: "preference", History: true})
	byID := make(map[string]memory.Memory)
	for _, m := range all {
		byID[m.ID] = m
	}
	if len(byID) != n {
		t.Fatalf("history = %d memories, want %d", len(byID), n)
	}
	for _, m := range all {
		if m.ID == active[0].ID {
			continue
		}
		if _, ok := byID[m.SupersededBy]; !ok || !superseded[m.ID] {
			t.Errorf("memory %s superseded by %q, want one of the history", m.ID, m.SupersededBy)
		}
	}
}

// raceRememberSameText: many writers remembering the same memory store
// it once.
func raceRememberSameText(t *testing.T, ns memory.Namespace, stores []memory.Store) {
	for _, key := range []string{"", "k"} {
		const n = 12
		res := make([]memory.Remembered, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res[i], errs[i] = stores[i%len(stores)].RememberMemory(context.Background(), ns, newMem("fact", key, "same text "+key, memT0))
			})
		}
		wg.Wait()
		created := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("RememberMemory(key %q) = %v", key, err)
			}
			if res[i].Status == memory.StatusCreated {
				created++
			} else if res[i].Status != memory.StatusUnchanged {
				t.Errorf("RememberMemory(key %q) = %s, want created or unchanged", key, res[i].Status)
			}
			if res[i].ID != res[0].ID {
				t.Errorf("RememberMemory(key %q) IDs %s and %s, want one memory", key, res[0].ID, res[i].ID)
			}
		}
		if created != 1 {
			t.Errorf("RememberMemory(key %q): %d created, want 1", key, created)
		}
	}
	if got := memRecall(t, stores[0], ns, memory.Query{History: true}); len(got) != 2 {
		t.Errorf("history = %q, want 2 memories", memIDs(got))
	}
}

// raceAcquire has sessions pod-<first>..pod-<first+11> ask for the lease
// at once and checks that exactly one wins, with epoch want, and that
// every other is refused with the winner's lease.
func raceAcquire(t *testing.T, ns memory.Namespace, stores []memory.Store, first int, at time.Time, takeOver, want int64) {
	t.Helper()
	const n = 12
	grants := make([]memory.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			grants[i], errs[i] = leaseAcquire(stores[i%len(stores)], ns, raceHolder(ns, fmt.Sprintf("pod-%d", first+i)), at, takeOver)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Errorf("AcquireStateLease: pod-%d and pod-%d both won", first+winner, first+i)
			}
			winner = i
			if grants[i].Epoch != want {
				t.Errorf("AcquireStateLease(pod-%d) won epoch %d, want %d", first+i, grants[i].Epoch, want)
			}
		}
	}
	if winner < 0 {
		t.Fatalf("AcquireStateLease: no winner; errors %v", errs)
	}
	for i, err := range errs {
		var held *memory.LeaseHeldError
		switch {
		case err == nil:
		case !errors.As(err, &held):
			t.Errorf("AcquireStateLease(pod-%d) = %v, want nil or a *LeaseHeldError", first+i, err)
		case held.Lease.Epoch != want || held.Lease.Holder != fmt.Sprintf("pod-%d", first+winner):
			t.Errorf("AcquireStateLease(pod-%d) held by %+v, want the winner pod-%d with epoch %d", first+i, held.Lease, first+winner, want)
		}
	}
}

// raceAcquireFree: of many sessions asking for a new slot's lease,
// exactly one gets epoch 1.
func raceAcquireFree(t *testing.T, ns memory.Namespace, stores []memory.Store) {
	raceAcquire(t, ns, stores, 1, memT0, 0, 1)
}

// raceAcquireExpired: of many sessions that find the lease expired, or
// take over a live one, exactly one gets the next epoch.
func raceAcquireExpired(t *testing.T, ns memory.Namespace, stores []memory.Store) {
	if _, err := leaseAcquire(stores[0], ns, raceHolder(ns, "pod-0"), memT0, 0); err != nil {
		t.Fatal(err)
	}
	raceAcquire(t, ns, stores, 1, memT0.Add(2*time.Minute), 0, 2)
	raceAcquire(t, ns, stores, 101, memT0.Add(2*time.Minute), 2, 3)
}

// racePut: of writers expecting the same version exactly one wins;
// writers of any version all win, each with a version of its own.
func racePut(t *testing.T, ns memory.Namespace, stores []memory.Store) {
	h := raceHolder(ns, "pod-a")
	g, err := leaseAcquire(stores[0], ns, h, memT0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = racePutState(stores[i%len(stores)], ns, h, g.Epoch, 0, fmt.Sprintf(`{"writer":%d}`, i))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, memory.ErrVersionConflict):
			t.Errorf("PutWorkingState(writer %d) = %v, want nil or ErrVersionConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("PutWorkingState(version 0) winners = %d, want 1", won)
	}
	versions := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			st, err := racePutState(stores[i%len(stores)], ns, h, g.Epoch, memory.AnyVersion, fmt.Sprintf(`{"writer":%d}`, i))
			errs[i], versions[i] = err, st.Version
		})
	}
	wg.Wait()
	seen := make(map[int64]bool)
	for i, err := range errs {
		if err != nil {
			t.Errorf("PutWorkingState(any version, writer %d) = %v", i, err)
		}
		if v := versions[i]; v < 2 || v > n+1 || seen[v] {
			t.Errorf("PutWorkingState(any version, writer %d) = version %d, want a version of its own in 2..%d", i, v, n+1)
		}
		seen[versions[i]] = true
	}
	if st := mustGetState(t, stores[0], ns); st.Version != n+1 {
		t.Errorf("GetWorkingState() = version %d, want %d (no lost update)", st.Version, n+1)
	}
}

// raceStaleEpochAfterTakeover: a holder that keeps writing while its
// lease is taken over is fenced off from the takeover on: every write it
// makes after the new holder's lease is refused with ErrLeaseLost, and
// the new holder's write is never overwritten.
func raceStaleEpochAfterTakeover(t *testing.T, ns memory.Namespace, stores []memory.Store) {
	oldHolder, newHolder := raceHolder(ns, "pod-a"), raceHolder(ns, "pod-b")
	old, err := leaseAcquire(stores[0], ns, oldHolder, memT0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu         sync.Mutex
		oldWins    []int64
		firstWin   = make(chan struct{})
		fenced     = make(chan struct{})
		stop       = make(chan struct{})
		winOnce    sync.Once
		fencedOnce sync.Once
		wg         sync.WaitGroup
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			st, err := racePutState(stores[i%len(stores)], ns, oldHolder, old.Epoch, memory.AnyVersion, fmt.Sprintf(`{"writer":"a","n":%d}`, i))
			switch {
			case err == nil:
				mu.Lock()
				oldWins = append(oldWins, st.Version)
				mu.Unlock()
				winOnce.Do(func() { close(firstWin) })
			case errors.Is(err, memory.ErrLeaseLost):
				fencedOnce.Do(func() { close(fenced) })
			default:
				t.Errorf("PutWorkingState(old holder) = %v, want nil or ErrLeaseLost", err)
				winOnce.Do(func() { close(firstWin) })
				fencedOnce.Do(func() { close(fenced) })
				return
			}
		}
	})
	<-firstWin
	last := stores[len(stores)-1]
	g, err := leaseAcquire(last, ns, newHolder, memT0, old.Epoch)
	if err != nil || g.Epoch != old.Epoch+1 {
		close(stop)
		wg.Wait()
		t.Fatalf("AcquireStateLease(takeover) = %+v, %v, want epoch %d", g, err, old.Epoch+1)
	}
	const value = `{"writer":"b"}`
	st, err := racePutState(last, ns, newHolder, g.Epoch, memory.AnyVersion, value)
	if err != nil {
		t.Errorf("PutWorkingState(new holder) = %v", err)
	}
	<-fenced
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, v := range oldWins {
		if v >= st.Version {
			t.Errorf("old holder wrote version %d after the new holder's %d", v, st.Version)
		}
	}
	final := mustGetState(t, stores[0], ns)
	if string(final.Value) != value || final.Version != st.Version || final.Version != int64(len(oldWins))+1 || final.UpdatedBy != "pod-b" {
		t.Errorf("GetWorkingState() = version %d %s by %s, want the new holder's version %d (%d old writes + 1)",
			final.Version, final.Value, final.UpdatedBy, st.Version, len(oldWins))
	}
}
