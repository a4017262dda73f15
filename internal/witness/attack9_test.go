package witness_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/witness"
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
