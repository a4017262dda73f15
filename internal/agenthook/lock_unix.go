//go:build unix

package agenthook

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock(2) on path (created 0600), retrying
// every poll while another process holds it, until ctx ends.
//
// A session end removes path while holding the lock, so a lock taken on
// a file path no longer names excludes nobody who opens path afterwards:
// once locked, the file must still be the one at path, else it is opened
// again.
func lockFile(ctx context.Context, path string, poll time.Duration) (unlock func(), err error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flockWait(ctx, f, poll); err != nil {
			f.Close()
			return nil, err
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		now, err := os.Stat(path)
		if err == nil && os.SameFile(held, now) {
			return func() { f.Close() }, nil // closing releases the lock
		}
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
}

// flockWait takes an exclusive flock(2) on f, retrying every poll while
// another process holds it, until ctx ends.
func flockWait(ctx context.Context, f *os.File, poll time.Duration) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}
