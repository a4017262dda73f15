package witness_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/internal/witness"
	"github.com/agentcustody/custody/verify"
)

// attack9Checkpoint returns a checkpoint text of any size and root signed
// by l's key, written by hand (FormatCheckpoint may refuse the size).
func attack9Checkpoint(t testing.TB, l *testLog, size int64, root tlog.Hash) []byte {
	t.Helper()
	text := fmt.Sprintf("%s\n%d\n%s\n", l.origin, size, root.String())
	msg, err := note.Sign(&note.Note{Text: text}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestAttack9HugeTreeSize: tlog.CheckTree never returns for a tree of more
// than 2^62 leaves (x/mod's maxpow2 loops once 1<<l overflows). A log
// that signs a checkpoint of size 2^62+1 and posts it with a one-hash
// proof from the witness's size pinned a witness core per request,
// forever, ignoring the request's context. The witness must refuse such a
// checkpoint as malformed, promptly.
func TestAttack9HugeTreeSize(t *testing.T) {
	l := newTestLog(t, origin, 5)
	e := newEnv(t, l)
	e.add(t, 0, 5)
	cp := attack9Checkpoint(t, l, 1<<62+1, tlog.Hash{1})
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		_, err := e.w.AddCheckpoint(ctx, 5, tlog.TreeProof{{2}}, cp)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, witness.ErrMalformed) || witness.HTTPStatusFor(err) != http.StatusBadRequest {
			t.Errorf("AddCheckpoint(5 -> 2^62+1) = %v, want ErrMalformed (400)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AddCheckpoint(5 -> 2^62+1) did not return within 10s (tlog.CheckTree loops)")
	}
	if size, _, err := e.db.LatestTree(context.Background(), origin); err != nil || size != 5 {
		t.Errorf("LatestTree() = %d, %v, want 5", size, err)
	}
	// The first checkpoint of a log needs no proof: a huge one must not
	// be stored either (every later proof from it would loop).
	l2 := newTestLog(t, "other.custody.example/log", 1)
	e2 := newEnv(t, l2)
	if _, err := e2.w.AddCheckpoint(context.Background(), 0, nil, attack9Checkpoint(t, l2, 1<<62+1, tlog.Hash{1})); !errors.Is(err, witness.ErrMalformed) {
		t.Errorf("AddCheckpoint(0 -> 2^62+1) = %v, want ErrMalformed", err)
	}
}

// TestAttack9ConcurrentForksHeld: two forks of the log race from the same
// witnessed size to the same new size with valid proofs. Exactly one is
// cosigned; the other gets a 409 with the new size, and retried from it, is
// refused as a fork. The witness never cosigns both roots.
func TestAttack9ConcurrentForksHeld(t *testing.T) {
	l := newTestLog(t, origin, 16)
	forked := l.fork(6)
	for range 5 {
		e := newEnv(t, l)
		e.add(t, 0, 6)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, lg := range []*testLog{l, forked} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.w.AddCheckpoint(context.Background(), 6, lg.proof(6, 16), lg.checkpoint(16))
			}()
		}
		wg.Wait()
		won, lost := -1, -1
		for i, err := range errs {
			switch {
			case err == nil && won < 0:
				won = i
			case errors.Is(err, witness.ErrConflict):
				lost = i
			default:
				t.Fatalf("AddCheckpoint of fork %d = %v (others: %v)", i, err, errs)
			}
		}
		if won < 0 || lost < 0 {
			t.Fatalf("want one fork cosigned and one conflict, got %v", errs)
		}
		loser := []*testLog{l, forked}[lost]
		if _, err := e.w.AddCheckpoint(context.Background(), 16, nil, loser.checkpoint(16)); !errors.Is(err, witness.ErrFork) {
			t.Errorf("the losing fork retried at the same size = %v, want ErrFork", err)
		}
	}
}

// TestAttack9CrossLogHeld: a witness following two logs refuses a
// checkpoint of one log signed only by the other log's key (403), a
// consistency proof with an extra hash (422), and the full 63 proof lines
// of garbage against a large tree (422), without panicking.
func TestAttack9CrossLogHeld(t *testing.T) {
	a := newTestLog(t, origin, 12)
	b := newTestLog(t, "other.custody.example/log", 3)
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w, err := witness.New(witness.Options{
		Name: witnessName, Key: ed25519.NewKeyFromSeed(make([]byte, 32)), Store: db,
		Logs: []witness.LogConfig{{Origin: a.origin, VerifierKeys: []string{a.vkey}}, {Origin: b.origin, VerifierKeys: []string{b.vkey}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// b's key signs a checkpoint with a's origin.
	if _, err := w.AddCheckpoint(ctx, 0, nil, a.checkpoint(5, b.signer)); !errors.Is(err, witness.ErrBadSignature) {
		t.Errorf("a's checkpoint signed by b's key = %v, want ErrBadSignature", err)
	}
	if _, err := w.AddCheckpoint(ctx, 0, nil, a.checkpoint(5)); err != nil {
		t.Fatal(err)
	}
	long := append(a.proof(5, 12), tlog.Hash{9})
	if _, err := w.AddCheckpoint(ctx, 5, long, a.checkpoint(12)); !errors.Is(err, witness.ErrBadProof) {
		t.Errorf("proof with an extra hash = %v, want ErrBadProof", err)
	}
	garbage := make(tlog.TreeProof, witness.MaxProofHashes)
	for i := range garbage {
		garbage[i][0] = byte(i)
	}
	if _, err := w.AddCheckpoint(ctx, 5, garbage, attack9Checkpoint(t, a, verify.MaxTreeSize, tlog.Hash{3})); !errors.Is(err, witness.ErrBadProof) {
		t.Errorf("63 garbage hashes to a tree of 2^62 = %v, want ErrBadProof", err)
	}
	if size, _, _ := db.LatestTree(ctx, a.origin); size != 5 {
		t.Errorf("stored size %d, want 5", size)
	}
}
