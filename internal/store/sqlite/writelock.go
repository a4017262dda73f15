package sqlite

import (
	"context"
	"database/sql"
)

// writeLock serialises the writes of one [DB] inside the process, first
// come first served. SQLite's busy handler only polls with sleeps, so
// two writers of one handle that meet on the file lock are not served in
// order: a goroutine that commits and begins again at once takes the
// lock back before a waiting one wakes, and can starve it until its
// busy timeout (a lease takeover against a holder writing in a loop got
// SQLITE_BUSY after 10 s). With this lock, writers of one handle queue
// in the process and meet on the file lock only writers of other
// handles and processes, which the busy timeout still covers.
//
// It is a channel of capacity 1 holding a token while a writer runs:
// senders blocked on a channel are queued in order, and a release hands
// the slot to the first of them directly, so a writer that releases and
// asks again goes behind those already waiting.
//
// A write must not be started while the same goroutine holds the lock
// (inside a tx callback): it would wait for itself. No callback in this
// package writes through d.tx or d.exec.
type writeLock chan struct{}

func newWriteLock() writeLock { return make(writeLock, 1) }

// lock waits for the lock, or returns ctx.Err() if ctx ends first.
func (l writeLock) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l writeLock) unlock() { <-l }

// exec runs a single write statement outside a transaction (autocommit)
// under the write lock.
func (d *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := d.wlock.lock(ctx); err != nil {
		return nil, err
	}
	defer d.wlock.unlock()
	return d.db.ExecContext(ctx, query, args...)
}
