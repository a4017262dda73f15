package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWriteLockNoStarvation: a writer of one handle committing in a tight
// loop does not starve another writer of the same handle: the second
// writer's transactions (a few, one after another) complete while the
// first still loops.
func TestWriteLockNoStarvation(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	write := func(name string, n int) error {
		return db.tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO signer_meta (name, value) VALUES (?, ?)`, name, n)
			return err
		})
	}
	var (
		started    = make(chan struct{})
		secondDone atomic.Bool
		doneInLoop bool
		loops      int
		loopErr    error
		wg         sync.WaitGroup
	)
	wg.Go(func() {
		stop := time.Now().Add(3 * time.Second)
		for ; time.Now().Before(stop); loops++ {
			if err := write("loop", loops); err != nil {
				loopErr = err
				break
			}
			if loops == 0 {
				close(started)
			}
		}
		doneInLoop = secondDone.Load()
	})
	<-started
	var err error
	for i := 0; i < 5 && err == nil; i++ {
		err = write("second", i)
	}
	secondDone.Store(true)
	wg.Wait()
	if loopErr != nil {
		t.Fatalf("looping writer: tx() = %v after %d commits", loopErr, loops)
	}
	if err != nil {
		t.Fatalf("second writer: tx() = %v", err)
	}
	if !doneInLoop {
		t.Errorf("second writer's transactions completed only after the looping writer stopped (%d commits)", loops)
	}
}

// TestWriteLockContext: a writer whose context ends while it waits for
// another writer of the handle gets the context's error.
func TestWriteLockContext(t *testing.T) {
	db := openTestDB(t)
	holding, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		db.tx(context.Background(), func(*sql.Tx) error {
			close(holding)
			<-release
			return nil
		})
	})
	<-holding
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := db.tx(ctx, func(*sql.Tx) error { return nil })
	close(release)
	wg.Wait()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("tx() while another writer holds the lock = %v, want %v", err, context.DeadlineExceeded)
	}
	if err := db.tx(context.Background(), func(*sql.Tx) error { return nil }); err != nil {
		t.Errorf("tx() after release = %v", err)
	}
}
