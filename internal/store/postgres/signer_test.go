package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestSignerStore(t *testing.T) {
	storetest.Signer(t, func(tb testing.TB) signer.Store { return openTestDB(tb) })
}

// TestSignerStoreReplicas races three pools on one schema: the append
// lock and the fencing check let exactly one of the racing batches in.
func TestSignerStoreReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.SignerReplicas(t, dbs[0], dbs[1], dbs[2])
}

// leafBatch is a batch of one leaf of run "r" at index size (run_seq
// size: the test's runs hold every leaf), with its stored hashes read
// from st.
func leafBatch(t *testing.T, st signer.Store, size int64) *signer.Batch {
	t.Helper()
	rec := []byte("record")
	hs, err := tlog.StoredHashes(size, rec, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		return st.ReadHashes(context.Background(), idx)
	}))
	if err != nil {
		t.Fatal(err)
	}
	b := &signer.Batch{Leaves: []signer.Leaf{{Index: size, Run: "r", RunSeq: size, Type: "t", Record: rec}}}
	for i, h := range hs {
		b.Hashes = append(b.Hashes, signer.IndexedHash{Index: tlog.StoredHashCount(size) + int64(i), Hash: h})
	}
	return b
}

func acquire(t *testing.T, db *DB) *SignerWriter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := db.AcquireSignerWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	return w
}

// TestSignerWriterLease: a second replica's AcquireSignerWriter waits
// while the first holds the lease and returns, with the next epoch, once
// it is released; the released writer can no longer append.
func TestSignerWriterLease(t *testing.T) {
	dbs := openReplicas(t, 2)
	ctx := context.Background()
	a := acquire(t, dbs[0])
	if a.Epoch() != 1 {
		t.Errorf("first lease Epoch() = %d, want 1", a.Epoch())
	}
	if err := a.Store().AppendBatch(ctx, leafBatch(t, dbs[0], 0)); err != nil {
		t.Fatalf("AppendBatch by the lease holder = %v", err)
	}

	got := make(chan *SignerWriter, 1)
	errc := make(chan error, 1)
	go func() {
		w, err := dbs[1].AcquireSignerWriter(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- w
	}()
	select {
	case <-got:
		t.Fatal("AcquireSignerWriter returned while another replica held the lease")
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(500 * time.Millisecond):
	}
	a.Release()
	select {
	case <-a.Lost():
	default:
		t.Error("Lost() not closed after Release")
	}
	var b *SignerWriter
	select {
	case b = <-got:
		defer b.Release()
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("AcquireSignerWriter still waiting 20s after the holder released")
	}
	if b.Epoch() != 2 {
		t.Errorf("second lease Epoch() = %d, want 2", b.Epoch())
	}
	if err := a.Store().AppendBatch(ctx, leafBatch(t, dbs[0], 1)); !errors.Is(err, signer.ErrLogConflict) {
		t.Errorf("AppendBatch by the released writer = %v, want ErrLogConflict", err)
	}
	if err := b.Store().AppendBatch(ctx, leafBatch(t, dbs[1], 1)); err != nil {
		t.Errorf("AppendBatch by the new holder = %v", err)
	}
	var epoch int64
	var pid uint32
	if err := dbs[0].pool.QueryRow(ctx, "SELECT epoch, pid FROM signer_writer").Scan(&epoch, &pid); err != nil || epoch != 2 || pid != b.PID() {
		t.Errorf("signer_writer = epoch %d pid %d, %v; want 2 and %d", epoch, pid, err, b.PID())
	}
}

// TestSignerWriterTakenOver: a holder whose lease connection dies sees
// Lost closed, and another replica takes the lease; a writer that has not
// yet noticed (here, one whose Lost never closes) is fenced by the epoch.
func TestSignerWriterTakenOver(t *testing.T) {
	dbs := openReplicas(t, 2)
	ctx := context.Background()
	a := acquire(t, dbs[0])
	if _, err := dbs[1].pool.Exec(ctx, "SELECT pg_terminate_backend($1)", int64(a.PID())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(4 * (writerHeartbeat + writerPingTimeout)):
		t.Fatal("Lost() not closed after the lease connection was terminated")
	}
	b := acquire(t, dbs[1])
	if b.Epoch() != a.Epoch()+1 {
		t.Errorf("taken-over lease Epoch() = %d, want %d", b.Epoch(), a.Epoch()+1)
	}
	stale := &SignerWriter{db: dbs[0], epoch: a.Epoch(), lost: make(chan struct{})}
	err := stale.Store().AppendBatch(ctx, leafBatch(t, dbs[0], 0))
	if !errors.Is(err, signer.ErrLogConflict) || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("AppendBatch with a superseded epoch = %v, want ErrLogConflict (taken over)", err)
	}
	if err := a.Store().AppendBatch(ctx, leafBatch(t, dbs[0], 0)); !errors.Is(err, signer.ErrLogConflict) {
		t.Errorf("AppendBatch after Lost = %v, want ErrLogConflict", err)
	}
	if n, err := dbs[0].TreeSize(ctx); err != nil || n != 0 {
		t.Errorf("TreeSize() = %d, %v, want 0", n, err)
	}
	if err := b.Store().AppendBatch(ctx, leafBatch(t, dbs[1], 0)); err != nil {
		t.Errorf("AppendBatch by the new holder = %v", err)
	}
}

// TestAcquireSignerWriterCancel: a wait given up by its context returns
// the context's error and leaves nothing behind: the next replica gets
// the lease as soon as the holder releases it, with the next epoch.
func TestAcquireSignerWriterCancel(t *testing.T) {
	dbs := openReplicas(t, 3)
	a := acquire(t, dbs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if w, err := dbs[1].AcquireSignerWriter(ctx); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			w.Release()
		}
		t.Fatalf("AcquireSignerWriter past its deadline = %v, want context.DeadlineExceeded", err)
	}
	a.Release()
	start := time.Now()
	c := acquire(t, dbs[2])
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("AcquireSignerWriter after the release took %v", el)
	}
	if c.Epoch() != 2 {
		t.Errorf("Epoch() = %d, want 2", c.Epoch())
	}
}

func TestAcquireSignerWriterErrorNeverQuotesPassword(t *testing.T) {
	const secret = "s3cret-Pa55word"
	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret) // trust auth ignores it
	db, err := Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w, err := db.AcquireSignerWriter(ctx)
	if err == nil {
		w.Release()
		t.Fatal("AcquireSignerWriter with a canceled context succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error quotes the password: %v", err)
	}
}
