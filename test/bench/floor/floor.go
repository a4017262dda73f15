// Package floor measures the floors that custody's benchmarks report
// their durable writes against, in the same run: a write + fsync of a
// file, and a one-row commit on PostgreSQL. They are what one durable
// operation would cost alone; a group commit divides them.
package floor

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fsync is the mean time of n writes of size bytes at offset 0 of a
// file in dir, each followed by fsync. The file is removed afterwards.
func Fsync(dir string, size, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-floor-")
	if err != nil {
		return 0, fmt.Errorf("fsync floor: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, size)
	start := time.Now()
	for range n {
		if _, err := f.WriteAt(buf, 0); err != nil {
			return 0, fmt.Errorf("fsync floor: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("fsync floor: %w", err)
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

// Commit is the mean time of n one-row INSERTs, each committed on its
// own, on the PostgreSQL at url (its search_path must allow creating a
// table; the table commit_floor is created and dropped).
func Commit(ctx context.Context, url string, n int) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("commit floor: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE commit_floor (x integer)"); err != nil {
		return 0, fmt.Errorf("commit floor: %w", err)
	}
	defer conn.Exec(ctx, "DROP TABLE commit_floor")
	start := time.Now()
	for range n {
		if _, err := conn.Exec(ctx, "INSERT INTO commit_floor VALUES (1)"); err != nil {
			return 0, fmt.Errorf("commit floor: %w", err)
		}
	}
	return time.Since(start) / time.Duration(n), nil
}
