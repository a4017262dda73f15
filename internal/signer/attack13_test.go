package signer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/verify"
)

// chaosStore fails about one AppendBatch in every, either before writing
// (nothing durable) or, when after is set, after writing (durable, but
// the caller sees an error).
type chaosStore struct {
	signer.Store
	mu     sync.Mutex
	rng    *rand.Rand
	every  int
	after  bool
	poison bool // an "after" failure fails inside the store's transaction instead
	fails  atomic.Int64
	calls  atomic.Int64
}

var errChaos = errors.New("chaos: transient store error")

func (c *chaosStore) AppendBatch(ctx context.Context, b *signer.Batch) error {
	c.calls.Add(1)
	c.mu.Lock()
	fail := c.rng.IntN(c.every) == 0
	after := c.after && c.rng.IntN(2) == 0
	d := time.Duration(c.rng.IntN(800)) * time.Microsecond
	c.mu.Unlock()
	time.Sleep(d)
	if !fail {
		return c.Store.AppendBatch(ctx, b)
	}
	c.fails.Add(1)
	if c.poison && after {
		// Fail inside the store's transaction, after its leaves were
		// inserted: a hash row that exists already.
		bad := *b
		bad.Hashes = append(append([]signer.IndexedHash(nil), b.Hashes...), signer.IndexedHash{Index: 0})
		if err := c.Store.AppendBatch(ctx, &bad); err == nil {
			return errors.New("poisoned batch committed")
		}
		return errChaos
	}
	if after {
		if err := c.Store.AppendBatch(ctx, b); err != nil {
			return err
		}
	}
	return errChaos
}

// TestAttackChaosCommits: random transient commit failures under
// concurrent callers, small batches and a commit window. The signer must
// never end in a log conflict, every acknowledged call is stored, a call
// whose commit failed before writing is not, a caller's calls are stored
// in the order it made them, and every run verifies.
func TestAttackChaosCommits(t *testing.T) {
	for _, mode := range []string{"before", "after", "poison"} {
		for _, mb := range []int{1, 3, 64} {
			t.Run(fmt.Sprintf("%s/maxbatch=%d", mode, mb), func(t *testing.T) {
				chaosRun(t, mode, mb)
			})
		}
	}
}

func chaosRun(t *testing.T, mode string, maxBatch int) {
	after := mode == "after"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := replicaDir(t)
	db, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cs := &chaosStore{Store: db, rng: rand.New(rand.NewPCG(1, uint64(maxBatch))), every: 5, after: mode != "before", poison: mode == "poison"}
	s, err := signer.New(ctx, signer.Options{Store: cs, KeyFile: filepath.Join(dir, "signer.key"),
		PolicyDir: filepath.Join(dir, "policies"), Log: slog.New(slog.DiscardHandler),
		IdleTimeout: time.Hour, IdleCheckInterval: time.Hour, CheckpointInterval: time.Hour,
		MaxBatch: maxBatch, CommitWindow: 300 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const runs, callers, calls = 4, 12, 20
	ids := make([]string, runs)
	for i := range ids {
		for {
			info, err := s.Register(ctx, identity())
			if err == nil {
				ids[i] = info.Run
				break
			}
			if !errors.Is(err, errChaos) {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	errored := map[string]bool{}
	var order [][]string // per caller, acknowledged call ids in order
	order = make([][]string, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				run := ids[(c+i)%runs]
				id := fmt.Sprintf("c%d-%d", c, i)
				_, err := s.Decide(ctx, identity(), run, signer.DecideRequest{CallID: id, Tool: "Bash", Args: []byte(`{"command":"ls"}`)})
				mu.Lock()
				if err == nil {
					acked[id] = true
					order[c] = append(order[c], id)
				} else {
					if errors.Is(err, signer.ErrLogConflict) || !errors.Is(err, errChaos) {
						t.Errorf("decide %s: %v", id, err)
					}
					errored[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {
	case <-s.Failed():
		t.Fatal("signer failed for good after transient commit errors")
	default:
	}
	if cs.fails.Load() == 0 {
		t.Fatal("no failure injected")
	}
	// Stop injecting, then one more call per run.
	cs.mu.Lock()
	cs.every = 1 << 30
	cs.mu.Unlock()
	for _, run := range ids {
		if _, err := s.Decide(ctx, identity(), run, signer.DecideRequest{CallID: "after", Tool: "Bash", Args: []byte(`{}`)}); err != nil {
			t.Fatalf("decide after the failures: %v", err)
		}
	}
	if _, err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	trustJSON, _ := s.Trust().Marshal()
	trust, _ := verify.ParseTrust(trustJSON)
	index := map[string]int64{}
	for _, run := range ids {
		b, err := s.Export(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := verify.Verify(b, trust); err != nil {
			t.Fatalf("run %s does not verify: %v", run, err)
		}
		leaves, err := db.RunLeaves(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range leaves {
			if l.RunSeq != int64(i) {
				t.Fatalf("run %s: leaf %d has run_seq %d", run, i, l.RunSeq)
			}
			r, err := verify.ParseRecord(l.Record)
			if err != nil {
				t.Fatal(err)
			}
			id, _ := r.Body["call_id"].(string)
			if id == "" || id == "after" {
				continue
			}
			if _, dup := index[id]; dup {
				t.Errorf("call %s stored twice", id)
			}
			index[id] = l.Index
			if !acked[id] && !after {
				t.Errorf("call %s stored but its caller got an error (failure before write)", id)
			}
		}
	}
	for id := range acked {
		if _, ok := index[id]; !ok {
			t.Errorf("acknowledged call %s has no record", id)
		}
	}
	for c, ids := range order {
		for i := 1; i < len(ids); i++ {
			if index[ids[i]] <= index[ids[i-1]] {
				t.Errorf("caller %d: %s (index %d) stored before %s (index %d)", c, ids[i], index[ids[i]], ids[i-1], index[ids[i-1]])
			}
		}
	}
	t.Logf("%d acked, %d errored, %d injected failures of %d commits", len(acked), len(errored), cs.fails.Load(), cs.calls.Load())
}

// blockStore blocks every AppendBatch until released.
type blockStore struct {
	signer.Store
	hold    chan struct{}
	entered chan struct{}
	once    sync.Once
	fail    atomic.Bool
}

func (b *blockStore) AppendBatch(ctx context.Context, bt *signer.Batch) error {
	b.once.Do(func() { close(b.entered) })
	<-b.hold
	if b.fail.Load() {
		return errChaos
	}
	return b.Store.AppendBatch(ctx, bt)
}

// TestAttackCloseWithQueue: Close while one commit is held and many
// requests are queued behind it (with a long window): Close returns, every
// caller returns (committed or refused), acknowledged ones are stored and
// no goroutine is left behind.
func TestAttackCloseWithQueue(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			before := runtime.NumGoroutine()
			ctx := context.Background()
			dir := replicaDir(t)
			db, err := sqlite.Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			bs := &blockStore{Store: db, hold: make(chan struct{}), entered: make(chan struct{})}
			close(bs.hold)
			s, err := signer.New(ctx, signer.Options{Store: bs, KeyFile: filepath.Join(dir, "signer.key"),
				PolicyDir: filepath.Join(dir, "policies"), Log: slog.New(slog.DiscardHandler),
				IdleTimeout: time.Hour, IdleCheckInterval: time.Hour, CheckpointInterval: time.Hour,
				MaxBatch: 4, CommitWindow: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Register(ctx, identity())
			if err != nil {
				t.Fatal(err)
			}
			bs.hold = make(chan struct{})
			bs.once = sync.Once{}
			bs.entered = make(chan struct{})
			bs.fail.Store(fail)
			const n = 40
			res := make(chan error, n)
			for i := range n {
				go func() {
					_, err := s.Decide(ctx, identity(), info.Run, signer.DecideRequest{CallID: fmt.Sprintf("c%d", i), Tool: "Bash", Args: []byte(`{}`)})
					res <- err
				}()
			}
			<-bs.entered
			time.Sleep(20 * time.Millisecond)
			closed := make(chan error, 1)
			go func() { closed <- s.Close() }()
			time.Sleep(20 * time.Millisecond)
			bs.fail.Store(false)
			if fail {
				// the held commit fails; later ones succeed
				bs.fail.Store(true)
				go func() { time.Sleep(5 * time.Millisecond); bs.fail.Store(false) }()
			}
			close(bs.hold)
			select {
			case <-closed:
			case <-time.After(20 * time.Second):
				t.Fatal("Close hangs")
			}
			okN := 0
			for range n {
				select {
				case err := <-res:
					if err == nil {
						okN++
					} else if !errors.Is(err, errChaos) && !errors.Is(err, signer.ErrClosed) {
						t.Errorf("decide: %v", err)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("a caller hangs after Close")
				}
			}
			leaves, err := db.RunLeaves(ctx, info.Run)
			if err != nil {
				t.Fatal(err)
			}
			decided := 0
			for _, l := range leaves {
				if l.Type == verify.TypeCallDecided {
					decided++
				}
			}
			if decided < okN {
				t.Errorf("%d acknowledged, %d stored", okN, decided)
			}
			t.Logf("%d ok, %d stored", okN, decided)
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if g := runtime.NumGoroutine(); g > before+2 {
				buf := make([]byte, 1<<16)
				t.Errorf("goroutines: %d before, %d after\n%s", before, g, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
