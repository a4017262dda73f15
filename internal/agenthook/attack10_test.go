package agenthook

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAttack10LockRemovedUnderWaiter: a session end removes the .lock
// file while holding it. A hook process already waiting on that file
// then gets a lock on an unlinked inode, while the next process creates
// a new .lock and locks that: both would hold "the" session lock at
// once (two runs registered, lost state writes).
func TestAttack10LockRemovedUnderWaiter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "s.lock")
	unlockA, err := lockFile(ctx, path, time.Millisecond)
	must(t, err)
	got := make(chan func(), 2)
	start := func() {
		go func() {
			u, err := lockFile(ctx, path, time.Millisecond)
			if err != nil {
				t.Error(err)
				u = func() {}
			}
			got <- u
		}()
	}
	start()                            // B
	time.Sleep(100 * time.Millisecond) // B has opened path and polls
	// A is a session end: it removes the lock file, then unlocks.
	must(t, os.Remove(path))
	unlockA()
	start() // C
	var first func()
	select {
	case first = <-got:
	case <-ctx.Done():
		t.Fatal("nobody got the lock after the holder released it")
	}
	select {
	case second := <-got:
		second()
		first()
		t.Fatal("two processes hold the session lock at once")
	case <-time.After(200 * time.Millisecond):
	}
	first()
	select {
	case second := <-got:
		second()
	case <-ctx.Done():
		t.Fatal("the other waiter never got the lock")
	}
}
