package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/witness"
)

var _ witness.Store = (*DB)(nil)

// witnessSchema is migration 4: per log origin, the latest tree the
// witness cosigned.
const witnessSchema = `CREATE TABLE witness_trees (
	origin     text PRIMARY KEY,    -- the log's checkpoint origin line
	tree_size  bigint NOT NULL CHECK (tree_size >= 0),
	root       bytea NOT NULL CHECK (length(root) = 32), -- RFC 6962 root hash
	updated_at bigint NOT NULL      -- unix seconds
);`

// LatestTree implements witness.Store.
func (d *DB) LatestTree(ctx context.Context, origin string) (int64, tlog.Hash, error) {
	size, root, err := latestTree(ctx, d.pool, origin, "")
	if err != nil {
		return 0, tlog.Hash{}, fmt.Errorf("postgres: read witness tree: %w", err)
	}
	return size, root, nil
}

// latestTree returns origin's stored tree, or (0, zero hash) if none,
// with lock appended to the query (e.g. "FOR UPDATE").
func latestTree(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, origin, lock string) (int64, tlog.Hash, error) {
	var (
		size int64
		raw  []byte
	)
	err := q.QueryRow(ctx, `SELECT tree_size, root FROM witness_trees WHERE origin = $1 `+lock, origin).Scan(&size, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, tlog.Hash{}, nil
	}
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	if len(raw) != tlog.HashSize {
		return 0, tlog.Hash{}, fmt.Errorf("stored root of %q has %d bytes", origin, len(raw))
	}
	return size, tlog.Hash(raw), nil
}

// CompareAndSwapTree implements witness.Store in one transaction that
// holds origin's row lock from the read of the stored size to the write,
// so that of concurrent swaps from one size, on any number of replicas,
// exactly one succeeds. A missing row is first inserted as (0, zero
// hash), which reads as no tree, so there is always a row to lock; that
// insert rolls back with a failed swap.
func (d *DB) CompareAndSwapTree(ctx context.Context, origin string, oldSize, newSize int64, newRoot tlog.Hash) error {
	if oldSize < 0 || newSize < oldSize {
		return fmt.Errorf("postgres: witness tree for %q: new size %d < old size %d", origin, newSize, oldSize)
	}
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO witness_trees (origin, tree_size, root, updated_at)
			VALUES ($1, 0, $2, extract(epoch FROM now())::bigint) ON CONFLICT (origin) DO NOTHING`,
			origin, make([]byte, tlog.HashSize)); err != nil {
			return err
		}
		size, root, err := latestTree(ctx, tx, origin, "FOR UPDATE")
		if err != nil {
			return err
		}
		if write, err := witness.CheckSwap(size, root, oldSize, newSize, newRoot); !write {
			return err
		}
		_, err = tx.Exec(ctx,
			`UPDATE witness_trees SET tree_size = $2, root = $3, updated_at = extract(epoch FROM now())::bigint WHERE origin = $1`,
			origin, newSize, newRoot[:])
		return err
	})
	var conflict *witness.ConflictError
	if errors.As(err, &conflict) || errors.Is(err, witness.ErrFork) {
		return err
	}
	if err != nil {
		return fmt.Errorf("postgres: store witness tree: %w", err)
	}
	return nil
}
