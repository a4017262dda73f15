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

// gateStore holds one armed AppendBatch until the test releases it with
// an error (nil: commit normally), so that the next batch is built on top
// of a commit whose outcome the test decides.
type gateStore struct {
	signer.Store
	armed atomic.Pointer[gate]
}

type gate struct {
	entered chan struct{}
	release chan error
}

func (g *gateStore) arm() *gate {
	x := &gate{entered: make(chan struct{}), release: make(chan error, 1)}
	g.armed.Store(x)
	return x
}

func (g *gateStore) AppendBatch(ctx context.Context, b *signer.Batch) error {
	if x := g.armed.Swap(nil); x != nil {
		close(x.entered)
		if err := <-x.release; err != nil {
			return err
		}
	}
	return g.Store.AppendBatch(ctx, b)
}

func openGated(t *testing.T, mod func(*signer.Options)) (*signer.Signer, *gateStore, *sqlite.DB, signer.Options) {
	t.Helper()
	ctx := context.Background()
	dir := replicaDir(t)
	db, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	gs := &gateStore{Store: db}
	opts := signer.Options{Store: gs, KeyFile: filepath.Join(dir, "signer.key"),
		PolicyDir: filepath.Join(dir, "policies"), Log: slog.New(slog.DiscardHandler),
		IdleTimeout: time.Hour, IdleCheckInterval: time.Hour, CheckpointInterval: time.Hour}
	if mod != nil {
		mod(&opts)
	}
	s, err := signer.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, gs, db, opts
}

// waitFor polls cond (in-memory state the batch being built changes).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPipelineCheckpointKeyOfUncommittedRotation: RotateKey is built (the
// new key becomes s.key()) while the batch before it commits. A Checkpoint
// in that window signs the committed tree with the new key, whose
// key.retired record is not committed. The earlier commit then fails: the
// rotation is refused unwritten and the reload finds a latest checkpoint
// that the log's key did not sign, so the signer refuses all writes and
// can no longer start on this store.
func TestPipelineCheckpointKeyOfUncommittedRotation(t *testing.T) {
	ctx := context.Background()
	s, gs, _, opts := openGated(t, nil)
	info, err := s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}
	oldKey := s.VerifierKey()

	g := gs.arm()
	decided := make(chan error, 1)
	go func() {
		_, err := s.Decide(ctx, identity(), info.Run, signer.DecideRequest{CallID: "c1", Tool: "Bash", Args: []byte(`{}`)})
		decided <- err
	}()
	<-g.entered // batch N (the decide) is committing
	rotated := make(chan error, 1)
	go func() { _, err := s.RotateKey(ctx); rotated <- err }()
	// RotateKey writes the new key file, then queues its record; the
	// append loop builds it at once (the commit goroutine is held at the
	// gate). VerifierKey and checkpoints must keep using the committed key.
	waitFor(t, "the rotated key file", func() bool {
		m, _ := filepath.Glob(opts.KeyFile + ".*")
		return len(m) > 0
	})
	time.Sleep(100 * time.Millisecond)
	if s.VerifierKey() != oldKey {
		t.Fatal("VerifierKey shows a rotation that has not committed")
	}
	cp, err := s.Checkpoint(ctx) // signs the committed tree (size 1)
	if err != nil {
		t.Fatal(err)
	}
	g.release <- errDiskFull // batch N fails; the rotation built on it is refused
	if err := <-decided; err == nil {
		t.Fatal("decide succeeded despite the injected failure")
	}
	if err := <-rotated; err == nil {
		t.Fatal("rotation succeeded although the batch before it failed")
	}

	if s.VerifierKey() != oldKey {
		t.Fatalf("after the reload the signing key is %s, want the committed %s", s.VerifierKey(), oldKey)
	}
	var errs []string
	if _, err := s.Register(ctx, identity()); err != nil {
		errs = append(errs, fmt.Sprintf("Register after a transient commit failure = %v (checkpoint of size %d was signed by the uncommitted key)", err, cp.Size))
	}
	s.Close()
	s2, err := signer.New(ctx, opts)
	if err != nil {
		errs = append(errs, fmt.Sprintf("New on the same store = %v", err))
	} else {
		s2.Close()
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// TestPipelineRollbackFlagAfterStaleRefusal: log.rollback_detected is
// built (s.rollback set) on top of a batch whose commit then fails. The
// stale batch is refused unwritten, but the reload does not restore
// s.rollback: the signer refuses writes for a rollback that neither the
// log nor the store's meta records, and later detections short-circuit
// without recording it.
func TestPipelineRollbackFlagAfterStaleRefusal(t *testing.T) {
	ctx := context.Background()
	w := newFakeWitness(t, "w1.example")
	s, gs, db, _ := openGated(t, func(o *signer.Options) { o.Witnesses = []signer.Witness{w} })
	defer s.Close()
	info, err := s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}

	g := gs.arm()
	decided := make(chan error, 1)
	go func() {
		_, err := s.Decide(ctx, identity(), info.Run, signer.DecideRequest{CallID: "c1", Tool: "Bash", Args: []byte(`{}`)})
		decided <- err
	}()
	<-g.entered
	w.mu.Lock()
	w.forced = 1000
	w.mu.Unlock()
	cpDone := make(chan error, 1)
	go func() { _, err := s.Checkpoint(ctx); cpDone <- err }()
	waitFor(t, "log.rollback_detected to be built", s.RollbackDetected)
	g.release <- errDiskFull
	<-decided
	err = <-cpDone
	t.Logf("Checkpoint during the failed commit = %v", err)

	// Another detection: the witness still holds 1000.
	if _, err := s.Checkpoint(ctx); !errors.Is(err, signer.ErrLogRollback) {
		t.Logf("second Checkpoint = %v", err)
	}
	leaves, err := db.RunLeaves(ctx, verify.LogRun)
	if err != nil && !errors.Is(err, signer.ErrNotFound) {
		t.Fatal(err)
	}
	recorded := false
	for _, l := range leaves {
		if l.Type == verify.TypeRollbackDetected {
			recorded = true
		}
	}
	_, merr := db.Meta(ctx, "rollback")
	if s.RollbackDetected() && (!recorded || merr != nil) {
		t.Errorf("signer refuses writes for a rollback (RollbackDetected=true) that is not recorded: log.rollback_detected in _log=%v, meta rollback err=%v", recorded, merr)
	}
}

// TestPipelineStaleRefusalKeepsConflict: a batch built on one that the
// store refused with ErrLogConflict is refused too; its callers should
// learn of the conflict (503 log_conflict), as the failed batch's do.
func TestPipelineStaleRefusalKeepsConflict(t *testing.T) {
	ctx := context.Background()
	s, gs, _, _ := openGated(t, nil)
	defer s.Close()
	info, err := s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}
	g := gs.arm()
	errs := make(chan error, 2)
	go func() {
		_, err := s.Decide(ctx, identity(), info.Run, signer.DecideRequest{CallID: "a", Tool: "Bash", Args: []byte(`{}`)})
		errs <- err
	}()
	<-g.entered
	go func() {
		_, err := s.Decide(ctx, identity(), info.Run, signer.DecideRequest{CallID: "b", Tool: "Bash", Args: []byte(`{}`)})
		errs <- err
	}()
	waitFor(t, "the second decide to be built", func() bool {
		st, err := s.Status(ctx, identity(), info.Run)
		return err == nil && st.Records == 3
	})
	g.release <- fmt.Errorf("%w: injected", signer.ErrLogConflict)
	for range 2 {
		if err := <-errs; !errors.Is(err, signer.ErrLogConflict) {
			t.Errorf("decide in a batch refused after a log conflict = %v (code %s), want ErrLogConflict", err, signer.ErrorCode(err))
		}
	}
}

// TestPipelineAckImpliesDurable: when a caller is acknowledged, its record
// is already in the store and the committed head (what Checkpoint signs)
// covers it, even while the next batch is being built.
func TestPipelineAckImpliesDurable(t *testing.T) {
	ctx := context.Background()
	dir := replicaDir(t)
	db, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fs := &flakyStore{Store: db, failAt: -1}
	s, err := signer.New(ctx, signer.Options{Store: fs, KeyFile: filepath.Join(dir, "signer.key"),
		PolicyDir: filepath.Join(dir, "policies"), Log: slog.New(slog.DiscardHandler),
		IdleTimeout: time.Hour, IdleCheckInterval: time.Hour, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info, err := s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				d, err := s.Decide(ctx, identity(), info.Run, signer.DecideRequest{CallID: fmt.Sprintf("c%d-%d", c, i), Tool: "Bash", Args: []byte(`{}`)})
				if err != nil {
					t.Error(err)
					return
				}
				if n, err := db.TreeSize(ctx); err != nil || n <= d.Index {
					t.Errorf("acknowledged record %d, stored tree size %d (%v)", d.Index, n, err)
				}
				if i%5 == 0 {
					cp, err := s.Checkpoint(ctx)
					if err != nil || cp.Size <= d.Index {
						t.Errorf("checkpoint after ack of %d = size %d (%v)", d.Index, cp.Size, err)
					}
					// The checkpoint signs a committed tree, never one still being built.
					if n, err := db.TreeSize(ctx); err != nil || cp.Size > n {
						t.Errorf("checkpoint of size %d signed, stored tree size %d (%v)", cp.Size, n, err)
					}
				}
			}
		}()
	}
	wg.Wait()
}
