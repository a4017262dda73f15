package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/signer"
)

var _ signer.InboxStore = (*DB)(nil)

// signerInboxSchema is migration 7: the model-call inbox (what the
// gateways of every replica observed, waiting for the replica holding
// the signer writer lease to record it) and the argument digests the run
// reconciliation matches (never part of a record).
const signerInboxSchema = `CREATE TABLE signer_inbox (
	id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	data bytea NOT NULL                          -- JSON of a signer.ModelCall
);
CREATE TABLE signer_arg_digests (
	run    text NOT NULL,
	idx    bigint NOT NULL,                      -- leaf index of the record
	pos    integer NOT NULL,                     -- tool use position; tool uses dropped for kind model_call; 0 for a decision
	kind   text NOT NULL,                        -- decided | requested | model_call
	tool   text NOT NULL,
	digest bytea,                                -- SHA-256 of the canonical args; NULL if unreadable
	PRIMARY KEY (idx, kind, pos)
);
CREATE INDEX signer_arg_digests_run ON signer_arg_digests (run, idx, pos);`

// PutInbox implements signer.InboxStore: one statement, one transaction.
func (d *DB) PutInbox(ctx context.Context, entries [][]byte) error {
	if len(entries) == 0 {
		return nil
	}
	if _, err := d.pool.Exec(ctx, `INSERT INTO signer_inbox (data) SELECT * FROM unnest($1::bytea[])`, entries); err != nil {
		return fmt.Errorf("postgres: put inbox: %w", err)
	}
	return nil
}

// Inbox implements signer.Store.
func (d *DB) Inbox(ctx context.Context, limit int) ([]signer.InboxEntry, error) {
	rows, err := d.pool.Query(ctx, `SELECT id, data FROM signer_inbox ORDER BY id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (signer.InboxEntry, error) {
		var e signer.InboxEntry
		err := r.Scan(&e.ID, &e.Data)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: %w", err)
	}
	return out, nil
}

// ArgDigests implements signer.Store.
func (d *DB) ArgDigests(ctx context.Context, run string) ([]signer.ArgDigest, error) {
	rows, err := d.pool.Query(ctx, `SELECT idx, pos, kind, tool, digest FROM signer_arg_digests WHERE run = $1 ORDER BY idx, pos`, run)
	if err != nil {
		return nil, fmt.Errorf("postgres: arg digests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (signer.ArgDigest, error) {
		a := signer.ArgDigest{Run: run}
		err := r.Scan(&a.Index, &a.Pos, &a.Kind, &a.Tool, &a.Digest)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: arg digests: %w", err)
	}
	return out, nil
}

// queueInbox queues a batch's argument digests and the removal of the
// inbox entries it recorded.
func queueInbox(queue func(name, sql string, args ...any), b *signer.Batch) {
	if n := len(b.Digests); n > 0 {
		run, kind, tool := make([]string, n), make([]string, n), make([]string, n)
		idx, pos := make([]int64, n), make([]int32, n)
		digest := make([][]byte, n)
		for i, a := range b.Digests {
			run[i], idx[i], pos[i], kind[i], tool[i], digest[i] = a.Run, a.Index, int32(a.Pos), a.Kind, a.Tool, a.Digest
		}
		queue("arg digests", `INSERT INTO signer_arg_digests (run, idx, pos, kind, tool, digest)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::integer[], $4::text[], $5::text[], $6::bytea[])`,
			run, idx, pos, kind, tool, digest)
	}
	if len(b.InboxDone) > 0 {
		queue("inbox", `DELETE FROM signer_inbox WHERE id = ANY($1::bigint[])`, b.InboxDone)
	}
}
