package signer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/verify"
)

// flakyStore fails its failAt-th AppendBatch (and is slow, so that the
// next batch is built while one commits).
type flakyStore struct {
	signer.Store
	calls  atomic.Int64
	failAt int64
}

var errDiskFull = errors.New("disk full")

func (f *flakyStore) AppendBatch(ctx context.Context, b *signer.Batch) error {
	time.Sleep(2 * time.Millisecond)
	if f.calls.Add(1) == f.failAt {
		return errDiskFull
	}
	return f.Store.AppendBatch(ctx, b)
}

// TestCommitFailureMidPipeline: a commit fails while the next batch is
// already built on top of it. Every caller whose decide succeeded has its
// record in the log; every caller whose batch failed (or was built on the
// failed one) gets an error and no record; the runs' chains stay
// unbroken and verify; the signer goes on appending afterwards.
func TestCommitFailureMidPipeline(t *testing.T) {
	ctx := context.Background()
	dir := replicaDir(t)
	db, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fs := &flakyStore{Store: db, failAt: 6}
	s, err := signer.New(ctx, signer.Options{Store: fs, KeyFile: filepath.Join(dir, "signer.key"),
		PolicyDir: filepath.Join(dir, "policies"), Log: slog.New(slog.DiscardHandler),
		IdleTimeout: time.Hour, IdleCheckInterval: time.Hour, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const runs, callers, calls = 4, 32, 10
	ids := make([]string, runs)
	for i := range ids {
		info, err := s.Register(ctx, identity())
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = info.Run
	}
	var mu sync.Mutex
	ok := map[string]map[string]bool{} // run -> call ids acknowledged
	failed := 0
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
					if ok[run] == nil {
						ok[run] = map[string]bool{}
					}
					ok[run][id] = true
				} else {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed == 0 {
		t.Fatal("no decide failed: the injected commit failure did not happen")
	}
	trustJSON, _ := s.Trust().Marshal()
	trust, _ := verify.ParseTrust(trustJSON)
	for _, run := range ids {
		// One more decide after the failure works.
		if _, err := s.Decide(ctx, identity(), run, signer.DecideRequest{CallID: "after", Tool: "Bash", Args: []byte(`{}`)}); err != nil {
			t.Fatalf("decide after the failed commit: %v", err)
		}
		if _, err := s.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := s.Export(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := verify.Verify(b, trust); err != nil {
			t.Fatalf("run %s does not verify after the failed commit: %v", run, err)
		}
		leaves, err := db.RunLeaves(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for _, l := range leaves {
			r, err := verify.ParseRecord(l.Record)
			if err != nil {
				t.Fatal(err)
			}
			if id, _ := r.Body["call_id"].(string); id != "" && id != "after" {
				stored[id] = true
			}
		}
		for id := range ok[run] {
			if !stored[id] {
				t.Errorf("run %s: acknowledged call %s has no record", run, id)
			}
		}
		for id := range stored {
			if !ok[run][id] {
				t.Errorf("run %s: call %s has a record but its caller got an error", run, id)
			}
		}
	}
	t.Logf("%d decides failed with the injected commit failure (and the batch built on it); %d AppendBatch calls", failed, fs.calls.Load())
}
