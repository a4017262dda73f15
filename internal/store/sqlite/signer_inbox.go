package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentcustody/custody/internal/signer"
)

var _ signer.InboxStore = (*DB)(nil)

// signerInboxSchema is migration 7: the model-call inbox (what gateways
// observed, waiting for the signer to record it) and the argument digests
// the run reconciliation matches (never part of a record).
const signerInboxSchema = `CREATE TABLE signer_inbox (
	id   INTEGER PRIMARY KEY AUTOINCREMENT,
	data BLOB NOT NULL                    -- JSON of a signer.ModelCall
) STRICT;
CREATE TABLE signer_arg_digests (
	run    TEXT NOT NULL,
	idx    INTEGER NOT NULL,              -- leaf index of the record
	pos    INTEGER NOT NULL,              -- tool use position; tool uses dropped for kind model_call; 0 for a decision
	kind   TEXT NOT NULL,                 -- decided | requested | model_call
	tool   TEXT NOT NULL,
	digest BLOB,                          -- SHA-256 of the canonical args; NULL if unreadable
	PRIMARY KEY (idx, kind, pos)
) STRICT;
CREATE INDEX signer_arg_digests_run ON signer_arg_digests (run, idx, pos);`

// signerDigestsByLeaf is migration 12: signer_arg_digests keeps one
// b-tree, keyed by (idx, kind, pos), and a run's digests are found
// through its leaves (signer_leaves' index on (run, run_seq); a digest's
// run is its leaf's run, which signer.Batch.Extends checks before every
// commit). Before, the table had a rowid b-tree and two indexes, one of
// them keyed by run: a group commit of records from n runs rewrote about
// n pages of that index (one run's entries sit together), a third of the
// pages the commit wrote.
const signerDigestsByLeaf = `CREATE TABLE signer_arg_digests_new (
	idx    INTEGER NOT NULL,              -- leaf index of the record
	kind   TEXT NOT NULL,                 -- decided | requested | model_call
	pos    INTEGER NOT NULL,              -- as in migration 7
	tool   TEXT NOT NULL,
	digest BLOB,                          -- SHA-256 of the canonical args; NULL if unreadable
	PRIMARY KEY (idx, kind, pos)
) STRICT, WITHOUT ROWID;
INSERT INTO signer_arg_digests_new (idx, kind, pos, tool, digest)
	SELECT idx, kind, pos, tool, digest FROM signer_arg_digests;
DROP TABLE signer_arg_digests;
ALTER TABLE signer_arg_digests_new RENAME TO signer_arg_digests;`

// PutInbox implements signer.InboxStore: the entries in one transaction.
func (d *DB) PutInbox(ctx context.Context, entries [][]byte) error {
	if len(entries) == 0 {
		return nil
	}
	err := d.tx(ctx, func(tx *sql.Tx) error {
		return d.insertRows(ctx, tx, insInbox, len(entries), func(i int) []any {
			return []any{entries[i]}
		})
	})
	if err != nil {
		return fmt.Errorf("sqlite: put inbox: %w", err)
	}
	return nil
}

// Inbox implements signer.Store.
func (d *DB) Inbox(ctx context.Context, limit int) ([]signer.InboxEntry, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT id, data FROM signer_inbox ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox: %w", err)
	}
	defer rows.Close()
	var out []signer.InboxEntry
	for rows.Next() {
		var e signer.InboxEntry
		if err := rows.Scan(&e.ID, &e.Data); err != nil {
			return nil, fmt.Errorf("sqlite: inbox: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: inbox: %w", err)
	}
	return out, nil
}

// ArgDigests implements signer.Store.
func (d *DB) ArgDigests(ctx context.Context, run string) ([]signer.ArgDigest, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT d.idx, d.pos, d.kind, d.tool, d.digest
		FROM signer_leaves l JOIN signer_arg_digests d ON d.idx = l.idx
		WHERE l.run = ? ORDER BY d.idx, d.pos, d.kind`, run)
	if err != nil {
		return nil, fmt.Errorf("sqlite: arg digests: %w", err)
	}
	defer rows.Close()
	var out []signer.ArgDigest
	for rows.Next() {
		a := signer.ArgDigest{Run: run}
		if err := rows.Scan(&a.Index, &a.Pos, &a.Kind, &a.Tool, &a.Digest); err != nil {
			return nil, fmt.Errorf("sqlite: arg digests: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: arg digests: %w", err)
	}
	return out, nil
}

// appendInbox writes a batch's argument digests and removes the inbox
// entries it recorded, in AppendBatch's transaction.
func (d *DB) appendInbox(ctx context.Context, tx *sql.Tx, b *signer.Batch) error {
	if err := d.insertRows(ctx, tx, insDigest, len(b.Digests), func(i int) []any {
		a := &b.Digests[i]
		var digest any
		if a.Digest != nil {
			digest = a.Digest
		}
		return []any{a.Index, a.Pos, a.Kind, a.Tool, digest}
	}); err != nil {
		return fmt.Errorf("arg digests: %w", err)
	}
	if err := d.execEach(ctx, tx, sqlInboxDone, len(b.InboxDone), func(i int) []any {
		return []any{b.InboxDone[i]}
	}); err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	return nil
}
