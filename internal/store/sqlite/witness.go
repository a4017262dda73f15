package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/witness"
)

// witnessSchema holds, per log origin, the latest tree the witness cosigned.
const witnessSchema = `CREATE TABLE witness_trees (
	origin     TEXT PRIMARY KEY,            -- the log's checkpoint origin line
	tree_size  INTEGER NOT NULL CHECK (tree_size >= 0),
	root       BLOB NOT NULL CHECK (length(root) = 32), -- RFC 6962 root hash
	updated_at INTEGER NOT NULL             -- unix seconds
) STRICT;`

var _ witness.Store = (*DB)(nil)

// LatestTree implements witness.Store.
func (d *DB) LatestTree(ctx context.Context, origin string) (int64, tlog.Hash, error) {
	size, root, err := latestTree(ctx, d.db, origin)
	if err != nil {
		return 0, tlog.Hash{}, fmt.Errorf("sqlite: read witness tree: %w", err)
	}
	return size, root, nil
}

// latestTree returns origin's stored tree, or (0, zero hash) if none.
func latestTree(ctx context.Context, q queryRower, origin string) (int64, tlog.Hash, error) {
	var (
		size int64
		raw  []byte
		root tlog.Hash
	)
	err := q.QueryRowContext(ctx, `SELECT tree_size, root FROM witness_trees WHERE origin = ?`, origin).Scan(&size, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, tlog.Hash{}, nil
	}
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	if len(raw) != tlog.HashSize {
		return 0, tlog.Hash{}, fmt.Errorf("stored root of %q has %d bytes", origin, len(raw))
	}
	copy(root[:], raw)
	return size, root, nil
}

// CompareAndSwapTree implements witness.Store in one IMMEDIATE transaction:
// the read of the stored size and the write are atomic across connections
// and processes, and durable (synchronous=FULL) on return.
func (d *DB) CompareAndSwapTree(ctx context.Context, origin string, oldSize, newSize int64, newRoot tlog.Hash) error {
	if oldSize < 0 || newSize < oldSize {
		return fmt.Errorf("sqlite: witness tree for %q: new size %d < old size %d", origin, newSize, oldSize)
	}
	err := d.tx(ctx, func(tx *sql.Tx) error {
		size, root, err := latestTree(ctx, tx, origin)
		if err != nil {
			return err
		}
		if write, err := witness.CheckSwap(size, root, oldSize, newSize, newRoot); !write {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO witness_trees (origin, tree_size, root, updated_at) VALUES (?, ?, ?, unixepoch())
			ON CONFLICT (origin) DO UPDATE SET tree_size = excluded.tree_size, root = excluded.root, updated_at = excluded.updated_at`,
			origin, newSize, newRoot[:])
		return err
	})
	var conflict *witness.ConflictError
	if errors.As(err, &conflict) || errors.Is(err, witness.ErrFork) {
		return err
	}
	if err != nil {
		return fmt.Errorf("sqlite: store witness tree: %w", err)
	}
	return nil
}
