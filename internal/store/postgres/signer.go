package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/signer"
)

var _ signer.Store = (*DB)(nil)

// signerSchema is migration 5: the signer's log (leaves and tlog stored
// hashes), runs, decided calls, args salts, approvals, checkpoints,
// policy snapshots, a small key-value table (rollback state), and the
// writer lease's epoch. Times are unix milliseconds (bigint), as the
// SQLite store keeps them. The unique constraints on signer_leaves (idx;
// run, run_seq) are the backstop of AppendBatch's fencing check.
const signerSchema = `CREATE TABLE signer_leaves (
	idx     bigint PRIMARY KEY CHECK (idx >= 0), -- leaf index, from 0, no gaps
	run     text NOT NULL,
	run_seq bigint NOT NULL CHECK (run_seq >= 0),
	type    text NOT NULL,
	record  bytea NOT NULL,                      -- canonical signed record
	UNIQUE (run, run_seq)
);
CREATE TABLE signer_hashes (
	idx  bigint PRIMARY KEY,                     -- tlog stored hash index
	hash bytea NOT NULL CHECK (length(hash) = 32)
);
CREATE TABLE signer_runs (
	run           text PRIMARY KEY,
	tenant        text NOT NULL,
	agent         text NOT NULL,
	session       text NOT NULL,
	identity      text NOT NULL,                 -- JSON as in run.registered, verbatim (not jsonb, which reorders)
	created_at    bigint NOT NULL,
	closed_reason text                           -- NULL while open
);
CREATE INDEX signer_runs_open ON signer_runs (created_at) WHERE closed_reason IS NULL;
CREATE TABLE signer_calls (
	run        text NOT NULL,
	call_id    text NOT NULL,
	tool       text NOT NULL,
	effect     text NOT NULL,
	idx        bigint NOT NULL,                  -- its call.decided leaf
	commitment text NOT NULL,
	PRIMARY KEY (run, call_id)
);
CREATE TABLE signer_salts (
	idx  bigint PRIMARY KEY,                     -- leaf index of the committing record
	salt bytea NOT NULL
);
CREATE TABLE signer_approvals (
	id          text PRIMARY KEY,
	run         text NOT NULL,
	call_id     text NOT NULL,
	tool        text NOT NULL,
	idx         bigint NOT NULL,                 -- its approval.requested leaf
	commitment  text NOT NULL,
	created_at  bigint NOT NULL,
	expires_at  bigint NOT NULL,
	state       text NOT NULL,
	resolved_at bigint                           -- NULL while pending
);
CREATE INDEX signer_approvals_run ON signer_approvals (run);
CREATE TABLE signer_checkpoints (
	size       bigint PRIMARY KEY,
	note       bytea NOT NULL,                   -- signed note with cosignatures
	created_at bigint NOT NULL
);
CREATE TABLE signer_policies (
	hash     text PRIMARY KEY,                   -- lowercase hex SHA-256 of snapshot
	snapshot bytea NOT NULL
);
CREATE TABLE signer_meta (
	name  text PRIMARY KEY,
	value text NOT NULL
);
CREATE TABLE signer_writer (
	one         boolean PRIMARY KEY DEFAULT true CHECK (one), -- at most one row
	epoch       bigint NOT NULL,                 -- fencing token: +1 per lease taken
	pid         integer NOT NULL,                -- backend pid of the holder's lease session
	acquired_at bigint NOT NULL
);`

// signerLockTag is the high 32 bits ("cust") of the signer's advisory
// lock keys; the low 32 bits are the OID of a signer table, so that each
// schema holding a log (replicas of one deployment share it; tests and
// other deployments do not) has locks of its own in the database-wide
// advisory lock space. The migration lock's high bits differ.
const signerLockTag int64 = 0x63757374

// appendLock is the transaction-scoped advisory lock every AppendBatch
// takes first, serializing appends to a schema's log across replicas.
const appendLock = `SELECT pg_advisory_xact_lock(($1::bigint << 32) | 'signer_leaves'::regclass::oid::bigint)`

// writerLock is the session-level advisory lock that is the writer lease.
const writerLock = `SELECT pg_advisory_lock(($1::bigint << 32) | 'signer_writer'::regclass::oid::bigint)`

func signerMS(t time.Time) int64 { return t.UnixMilli() }

func signerTime(v int64) time.Time { return time.UnixMilli(v).UTC() }

// AppendBatch implements signer.Store in one transaction of three round
// trips (BEGIN; one pipeline; COMMIT), plus one to prepare the
// statements the first time a pooled connection runs them: it takes the schema's append lock,
// reads the tree size and the heads of the batch's runs, checks that b
// extends them (signer.Batch.Extends; errors wrap signer.ErrLogConflict),
// and inserts every table's rows with one statement each (unnest of
// arrays). Approvals and closed runs named twice in b are written once,
// the later one winning. On any error nothing is committed.
//
// It does not consult the writer lease; replicas sharing the database
// append through [SignerWriter.Store], which also checks the lease.
func (d *DB) AppendBatch(ctx context.Context, b *signer.Batch) error {
	return d.appendBatch(ctx, b, nil)
}

// appendBatch is AppendBatch, fenced by w's lease epoch when w is not nil.
func (d *DB) appendBatch(ctx context.Context, b *signer.Batch, w *SignerWriter) error {
	if w != nil {
		if err := w.usable(); err != nil {
			return fmt.Errorf("postgres: append signer batch: %w", err)
		}
	}
	err := d.tx(ctx, func(tx pgx.Tx) error {
		q := &pgx.Batch{}
		q.Queue(appendLock, signerLockTag)
		if w != nil {
			q.Queue(`SELECT COALESCE((SELECT epoch FROM signer_writer), 0)`)
		}
		if len(b.Leaves) > 0 {
			q.Queue(`SELECT COALESCE(max(idx) + 1, 0) FROM signer_leaves`)
			q.Queue(`SELECT r.run, (SELECT max(run_seq) FROM signer_leaves l WHERE l.run = r.run)
				FROM unnest($1::text[]) AS r(run)`, b.LeafRuns())
		}
		inserts := queueInserts(q, b)
		br := tx.SendBatch(ctx, q)
		if err := checkAppend(br, b, w); err != nil {
			br.Close() // runs the queued inserts; the transaction rolls back
			return err
		}
		for _, name := range inserts {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return fmt.Errorf("%s: %w", name, backstop(err))
			}
		}
		return br.Close()
	})
	if err != nil {
		return fmt.Errorf("postgres: append signer batch: %w", err)
	}
	return nil
}

// checkAppend reads the results of the lock and the checks appendBatch
// queued and returns an error wrapping signer.ErrLogConflict when b does
// not extend the stored log or w's lease was taken over.
func checkAppend(br pgx.BatchResults, b *signer.Batch, w *SignerWriter) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock log: %w", err)
	}
	if w != nil {
		var epoch int64
		if err := br.QueryRow().Scan(&epoch); err != nil {
			return fmt.Errorf("read writer epoch: %w", err)
		}
		if epoch != w.epoch {
			return fmt.Errorf("%w: this writer's lease (epoch %d) was taken over by epoch %d", signer.ErrLogConflict, w.epoch, epoch)
		}
	}
	if len(b.Leaves) == 0 {
		return b.Extends(0, nil) // refuses digests without their leaves
	}
	var size int64
	if err := br.QueryRow().Scan(&size); err != nil {
		return fmt.Errorf("tree size: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("run heads: %w", err)
	}
	heads := map[string]int64{}
	for rows.Next() {
		var run string
		var head *int64
		if err := rows.Scan(&run, &head); err != nil {
			rows.Close()
			return fmt.Errorf("run heads: %w", err)
		}
		if head != nil {
			heads[run] = *head
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("run heads: %w", err)
	}
	return b.Extends(size, heads)
}

// backstop marks a unique violation on signer_leaves, which only a writer
// that skipped the append lock can cause, as a log conflict.
func backstop(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.TableName == "signer_leaves" {
		return fmt.Errorf("%w: %w", signer.ErrLogConflict, err)
	}
	return err
}

// signerBytes maps a nil byte slice to an empty one (NOT NULL bytea columns).
func signerBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// queueInserts queues one statement per table b writes to, in the order
// the SQLite store writes them, and returns their names for errors.
func queueInserts(q *pgx.Batch, b *signer.Batch) []string {
	var names []string
	queue := func(name, sql string, args ...any) {
		names = append(names, name)
		q.Queue(sql, args...)
	}
	if n := len(b.Leaves); n > 0 {
		idx, seq := make([]int64, n), make([]int64, n)
		run, typ := make([]string, n), make([]string, n)
		rec := make([][]byte, n)
		for i, l := range b.Leaves {
			idx[i], run[i], seq[i], typ[i], rec[i] = l.Index, l.Run, l.RunSeq, l.Type, signerBytes(l.Record)
		}
		queue("leaves", `INSERT INTO signer_leaves (idx, run, run_seq, type, record)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::bytea[])`, idx, run, seq, typ, rec)
	}
	if n := len(b.Hashes); n > 0 {
		idx, hs := make([]int64, n), make([][]byte, n)
		for i := range b.Hashes {
			idx[i], hs[i] = b.Hashes[i].Index, b.Hashes[i].Hash[:]
		}
		queue("hashes", `INSERT INTO signer_hashes (idx, hash) SELECT * FROM unnest($1::bigint[], $2::bytea[])`, idx, hs)
	}
	if n := len(b.Salts); n > 0 {
		idx, salts := make([]int64, n), make([][]byte, n)
		for i, s := range b.Salts {
			idx[i], salts[i] = s.Index, signerBytes(s.Salt)
		}
		queue("salts", `INSERT INTO signer_salts (idx, salt) SELECT * FROM unnest($1::bigint[], $2::bytea[])`, idx, salts)
	}
	if n := len(b.NewRuns); n > 0 {
		id, tenant, agent, session, ident := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		created := make([]int64, n)
		for i, r := range b.NewRuns {
			id[i], tenant[i], agent[i], session[i], ident[i], created[i] = r.ID, r.Tenant, r.Agent, r.Session, string(r.Identity), signerMS(r.CreatedAt)
		}
		queue("runs", `INSERT INTO signer_runs (run, tenant, agent, session, identity, created_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])`,
			id, tenant, agent, session, ident, created)
	}
	if closes := lastByKey(b.ClosedRuns, func(c signer.RunClose) string { return c.ID }); len(closes) > 0 {
		id, reason := make([]string, len(closes)), make([]string, len(closes))
		for i, c := range closes {
			id[i], reason[i] = c.ID, c.Reason
		}
		queue("close runs", `UPDATE signer_runs AS r SET closed_reason = c.reason
			FROM unnest($1::text[], $2::text[]) AS c(run, reason) WHERE r.run = c.run`, id, reason)
	}
	if n := len(b.Calls); n > 0 {
		run, call, tool, effect, commit := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		idx := make([]int64, n)
		for i, c := range b.Calls {
			run[i], call[i], tool[i], effect[i], idx[i], commit[i] = c.Run, c.CallID, c.Tool, c.Effect, c.Index, c.Commitment
		}
		queue("calls", `INSERT INTO signer_calls (run, call_id, tool, effect, idx, commitment)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[])`,
			run, call, tool, effect, idx, commit)
	}
	if aps := lastByKey(b.Approvals, func(a signer.ApprovalRow) string { return a.ID }); len(aps) > 0 {
		n := len(aps)
		id, run, call, tool, commit, state := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		idx, created, expires := make([]int64, n), make([]int64, n), make([]int64, n)
		resolved := make([]pgtype.Int8, n)
		for i, a := range aps {
			id[i], run[i], call[i], tool[i], idx[i], commit[i] = a.ID, a.Run, a.CallID, a.Tool, a.Index, a.Commitment
			created[i], expires[i], state[i] = signerMS(a.CreatedAt), signerMS(a.ExpiresAt), a.State
			if !a.ResolvedAt.IsZero() {
				resolved[i] = pgtype.Int8{Int64: signerMS(a.ResolvedAt), Valid: true}
			}
		}
		queue("approvals", `INSERT INTO signer_approvals
			(id, run, call_id, tool, idx, commitment, created_at, expires_at, state, resolved_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[],
				$7::bigint[], $8::bigint[], $9::text[], $10::bigint[])
			ON CONFLICT (id) DO UPDATE SET run = excluded.run, call_id = excluded.call_id, tool = excluded.tool,
				idx = excluded.idx, commitment = excluded.commitment, created_at = excluded.created_at,
				expires_at = excluded.expires_at, state = excluded.state, resolved_at = excluded.resolved_at`,
			id, run, call, tool, idx, commit, created, expires, state, resolved)
	}
	if len(b.Meta) > 0 {
		names, values := make([]string, 0, len(b.Meta)), make([]string, 0, len(b.Meta))
		for k, v := range b.Meta {
			names, values = append(names, k), append(values, v)
		}
		queue("meta", `INSERT INTO signer_meta (name, value) SELECT * FROM unnest($1::text[], $2::text[])
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, names, values)
	}
	queueInbox(queue, b)
	return names
}

// lastByKey returns rows without earlier rows of the same key, in order:
// one statement may not insert or update a row twice.
func lastByKey[T any](rows []T, key func(T) string) []T {
	last := make(map[string]int, len(rows))
	for i, r := range rows {
		last[key(r)] = i
	}
	if len(last) == len(rows) {
		return rows
	}
	out := make([]T, 0, len(last))
	for i, r := range rows {
		if last[key(r)] == i {
			out = append(out, r)
		}
	}
	return out
}

// ReadHashes implements signer.Store with one query.
func (d *DB) ReadHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	pos := make(map[int64][]int, len(indexes))
	uniq := make([]int64, 0, len(indexes))
	for i, x := range indexes {
		if _, ok := pos[x]; !ok {
			uniq = append(uniq, x)
		}
		pos[x] = append(pos[x], i)
	}
	if len(uniq) == 0 {
		return out, nil
	}
	rows, err := d.pool.Query(ctx, `SELECT idx, hash FROM signer_hashes WHERE idx = ANY($1)`, uniq)
	if err != nil {
		return nil, fmt.Errorf("postgres: read hashes: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var x int64
		var h []byte
		if err := rows.Scan(&x, &h); err != nil {
			return nil, fmt.Errorf("postgres: read hashes: %w", err)
		}
		for _, i := range pos[x] {
			copy(out[i][:], h)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read hashes: %w", err)
	}
	if n != len(uniq) {
		return nil, fmt.Errorf("postgres: read hashes: %w: %d of %d stored hashes", signer.ErrNotFound, n, len(uniq))
	}
	return out, nil
}

// TreeSize implements signer.Store.
func (d *DB) TreeSize(ctx context.Context) (int64, error) {
	var n int64
	if err := d.pool.QueryRow(ctx, `SELECT COALESCE(max(idx) + 1, 0) FROM signer_leaves`).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: tree size: %w", err)
	}
	return n, nil
}

const leafCols = `idx, run, run_seq, type, record`

func scanLeaf(row pgx.Row) (signer.Leaf, error) {
	var l signer.Leaf
	err := row.Scan(&l.Index, &l.Run, &l.RunSeq, &l.Type, &l.Record)
	return l, err
}

// RunLeaves implements signer.Store.
func (d *DB) RunLeaves(ctx context.Context, run string) ([]signer.Leaf, error) {
	rows, _ := d.pool.Query(ctx, `SELECT `+leafCols+` FROM signer_leaves WHERE run = $1 ORDER BY run_seq`, run)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (signer.Leaf, error) { return scanLeaf(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: run leaves: %w", err)
	}
	return out, nil
}

// LastLeaf implements signer.Store.
func (d *DB) LastLeaf(ctx context.Context, run string) (signer.Leaf, error) {
	l, err := scanLeaf(d.pool.QueryRow(ctx,
		`SELECT `+leafCols+` FROM signer_leaves WHERE run = $1 ORDER BY run_seq DESC LIMIT 1`, run))
	if errors.Is(err, pgx.ErrNoRows) {
		return l, signer.ErrNotFound
	}
	if err != nil {
		return l, fmt.Errorf("postgres: last leaf: %w", err)
	}
	return l, nil
}

const runCols = `run, tenant, agent, session, identity, created_at, COALESCE(closed_reason, '')`

func scanRun(row pgx.Row) (signer.RunRow, error) {
	var r signer.RunRow
	var id string
	var created int64
	err := row.Scan(&r.ID, &r.Tenant, &r.Agent, &r.Session, &id, &created, &r.ClosedReason)
	r.Identity = []byte(id)
	r.CreatedAt = signerTime(created)
	return r, err
}

// Run implements signer.Store.
func (d *DB) Run(ctx context.Context, id string) (signer.RunRow, error) {
	r, err := scanRun(d.pool.QueryRow(ctx, `SELECT `+runCols+` FROM signer_runs WHERE run = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, signer.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("postgres: run: %w", err)
	}
	return r, nil
}

// OpenRuns implements signer.Store, oldest first.
func (d *DB) OpenRuns(ctx context.Context) ([]signer.RunRow, error) {
	rows, _ := d.pool.Query(ctx, `SELECT `+runCols+` FROM signer_runs WHERE closed_reason IS NULL ORDER BY created_at, run`)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (signer.RunRow, error) { return scanRun(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: open runs: %w", err)
	}
	return out, nil
}

// Calls implements signer.Store, in leaf order.
func (d *DB) Calls(ctx context.Context, run string) ([]signer.CallRow, error) {
	rows, _ := d.pool.Query(ctx,
		`SELECT run, call_id, tool, effect, idx, commitment FROM signer_calls WHERE run = $1 ORDER BY idx, call_id`, run)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (signer.CallRow, error) {
		var c signer.CallRow
		err := r.Scan(&c.Run, &c.CallID, &c.Tool, &c.Effect, &c.Index, &c.Commitment)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: calls: %w", err)
	}
	return out, nil
}

const approvalCols = `id, run, call_id, tool, idx, commitment, created_at, expires_at, state, resolved_at`

func scanApproval(row pgx.Row) (signer.ApprovalRow, error) {
	var a signer.ApprovalRow
	var created, expires int64
	var resolved *int64
	err := row.Scan(&a.ID, &a.Run, &a.CallID, &a.Tool, &a.Index, &a.Commitment, &created, &expires, &a.State, &resolved)
	a.CreatedAt, a.ExpiresAt = signerTime(created), signerTime(expires)
	if resolved != nil {
		a.ResolvedAt = signerTime(*resolved)
	}
	return a, err
}

// Approvals implements signer.Store, in leaf order.
func (d *DB) Approvals(ctx context.Context, run string) ([]signer.ApprovalRow, error) {
	rows, _ := d.pool.Query(ctx, `SELECT `+approvalCols+` FROM signer_approvals WHERE run = $1 ORDER BY idx, id`, run)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (signer.ApprovalRow, error) { return scanApproval(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: approvals: %w", err)
	}
	return out, nil
}

// Approval implements signer.Store.
func (d *DB) Approval(ctx context.Context, id string) (signer.ApprovalRow, error) {
	a, err := scanApproval(d.pool.QueryRow(ctx, `SELECT `+approvalCols+` FROM signer_approvals WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, signer.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("postgres: approval: %w", err)
	}
	return a, nil
}

// Salt implements signer.Store.
func (d *DB) Salt(ctx context.Context, index int64) ([]byte, error) {
	var s []byte
	err := d.pool.QueryRow(ctx, `SELECT salt FROM signer_salts WHERE idx = $1`, index).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, signer.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: salt: %w", err)
	}
	return s, nil
}

// PutCheckpoint implements signer.Store. A replaced checkpoint keeps its
// first created_at.
func (d *DB) PutCheckpoint(ctx context.Context, c signer.CheckpointRow) error {
	_, err := d.pool.Exec(ctx,
		`INSERT INTO signer_checkpoints (size, note, created_at) VALUES ($1, $2, $3)
		 ON CONFLICT (size) DO UPDATE SET note = excluded.note`, c.Size, signerBytes(c.Note), signerMS(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("postgres: put checkpoint: %w", err)
	}
	return nil
}

// LatestCheckpoint implements signer.Store.
func (d *DB) LatestCheckpoint(ctx context.Context) (signer.CheckpointRow, error) {
	var c signer.CheckpointRow
	var created int64
	err := d.pool.QueryRow(ctx,
		`SELECT size, note, created_at FROM signer_checkpoints ORDER BY size DESC LIMIT 1`).Scan(&c.Size, &c.Note, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, signer.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("postgres: latest checkpoint: %w", err)
	}
	c.CreatedAt = signerTime(created)
	return c, nil
}

// PutPolicy implements signer.Store; the first snapshot stored for a hash
// is kept.
func (d *DB) PutPolicy(ctx context.Context, hash string, snapshot []byte) error {
	err := d.tx(ctx, func(tx pgx.Tx) error { // read committed: replicas store one policy at once (see RevokeKey)
		_, err := tx.Exec(ctx,
			`INSERT INTO signer_policies (hash, snapshot) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING`, hash, signerBytes(snapshot))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: put policy: %w", err)
	}
	return nil
}

// Policy implements signer.Store.
func (d *DB) Policy(ctx context.Context, hash string) ([]byte, error) {
	var s []byte
	err := d.pool.QueryRow(ctx, `SELECT snapshot FROM signer_policies WHERE hash = $1`, hash).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, signer.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: policy: %w", err)
	}
	return s, nil
}

// Meta implements signer.Store.
func (d *DB) Meta(ctx context.Context, name string) (string, error) {
	var v string
	err := d.pool.QueryRow(ctx, `SELECT value FROM signer_meta WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", signer.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("postgres: meta: %w", err)
	}
	return v, nil
}

// Writer lease timing: the lease connection is pinged every
// writerHeartbeat and declared lost when a ping fails or takes longer than
// writerPingTimeout; the server drops a silent lease connection (and so
// releases the lease) after about tcp_keepalives_idle + count × interval
// = 25s.
const (
	writerHeartbeat   = 2 * time.Second
	writerPingTimeout = 5 * time.Second
	writerSession     = `SET statement_timeout = 0; SET lock_timeout = 0;
		SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3`
)

// SignerWriter is this process's lease on appending to the signer's log
// in the database: among the replicas sharing a database, at most one
// holds it at a time. It is a session-level advisory lock held on a
// dedicated connection (outside the pool), plus an epoch, a fencing token
// stored in table signer_writer and incremented each time the lease is
// taken. Appends through [SignerWriter.Store] check, in their transaction,
// that the stored epoch is still this lease's, so a writer whose lease
// ended (its connection died and another replica took over) cannot
// append even before it notices. The lease needs a session of its own on
// the server: behind a pooler, use session pooling (PgBouncer's
// transaction pooling would drop the lock between statements). Its
// methods are safe for concurrent use.
type SignerWriter struct {
	db    *DB
	epoch int64
	pid   uint32
	conn  *pgx.Conn // owned by the heartbeat goroutine
	lost  chan struct{}
	stop  chan struct{}
	once  sync.Once
}

// AcquireSignerWriter blocks until this process holds the signer writer
// lease, or ctx ends (its error is returned, and nothing is held). It
// opens a dedicated connection with the pool's settings (server-side
// statement and lock timeouts off, TCP keepalives on), waits on the
// session-level advisory lock, then, after any append already in flight
// has committed, increments the stored epoch, so that a signer started
// after this returns loads a log no earlier lease holder can extend. The
// caller must call [SignerWriter.Release], and should stop writing when
// [SignerWriter.Lost] is closed. A failed connection is an error; the
// caller retries (or exits and is restarted).
func (d *DB) AcquireSignerWriter(ctx context.Context) (*SignerWriter, error) {
	pcfg := d.pool.Config()
	cfg := pcfg.ConnConfig
	// On ctx's end, ask the server to cancel the lock wait (the default
	// handler only breaks the connection, leaving the backend waiting).
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: signer writer lease: connect to %s: %w", where(pcfg), err)
	}
	w := &SignerWriter{db: d, conn: conn, pid: conn.PgConn().PID(), lost: make(chan struct{}), stop: make(chan struct{})}
	if err := w.acquire(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), writerPingTimeout)
		conn.Close(cctx) // ends the session, and any lock it holds
		cancel()
		if ctx.Err() != nil {
			err = ctx.Err() // the server's "canceling statement" says less
		}
		return nil, fmt.Errorf("postgres: signer writer lease: %w", err)
	}
	go w.heartbeat()
	return w, nil
}

func (w *SignerWriter) acquire(ctx context.Context) error {
	if _, err := w.conn.Exec(ctx, writerSession); err != nil {
		return fmt.Errorf("configure session: %w", err)
	}
	if _, err := w.conn.Exec(ctx, writerLock, signerLockTag); err != nil {
		return fmt.Errorf("wait for the lease: %w", err)
	}
	return pgx.BeginTxFunc(ctx, w.conn, readCommitted, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, appendLock, signerLockTag); err != nil {
			return fmt.Errorf("wait for appends in flight: %w", err)
		}
		err := tx.QueryRow(ctx, `INSERT INTO signer_writer (one, epoch, pid, acquired_at)
			VALUES (true, 1, pg_backend_pid(), (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
			ON CONFLICT (one) DO UPDATE SET epoch = signer_writer.epoch + 1, pid = excluded.pid, acquired_at = excluded.acquired_at
			RETURNING epoch`).Scan(&w.epoch)
		if err != nil {
			return fmt.Errorf("take epoch: %w", err)
		}
		return nil
	})
}

// heartbeat pings the lease connection until Release or a failed ping,
// then closes it (ending the lease) and closes lost.
func (w *SignerWriter) heartbeat() {
	defer close(w.lost)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), writerPingTimeout)
		w.conn.Close(ctx)
		cancel()
	}()
	tk := time.NewTicker(writerHeartbeat)
	defer tk.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), writerPingTimeout)
		err := w.conn.Ping(ctx)
		cancel()
		if err != nil {
			return
		}
	}
}

// Epoch is the lease's fencing token: 1 for the first lease taken on the
// database, one more for each later one.
func (w *SignerWriter) Epoch() int64 { return w.epoch }

// PID is the server process ID of the lease session (pg_stat_activity.pid),
// for operators looking for the holder.
func (w *SignerWriter) PID() uint32 { return w.pid }

// Lost returns a channel closed when the lease has ended: its connection
// failed a heartbeat (within writerHeartbeat + writerPingTimeout, 7s, of
// dying), or Release was called. Appends through Store are refused from
// then on; the process should stop its signer and acquire the lease again.
func (w *SignerWriter) Lost() <-chan struct{} { return w.lost }

// Release ends the lease: it closes the lease connection, which releases
// the advisory lock, and waits for that (at most 2 × writerPingTimeout,
// 10s, if the server does not answer). Appends through Store are refused
// from then on. Calling it again does nothing.
func (w *SignerWriter) Release() {
	w.once.Do(func() { close(w.stop) })
	<-w.lost
}

// usable returns an error wrapping signer.ErrLogConflict once the lease
// has ended.
func (w *SignerWriter) usable() error {
	select {
	case <-w.lost:
		return fmt.Errorf("%w: the writer lease (epoch %d) has ended", signer.ErrLogConflict, w.epoch)
	default:
		return nil
	}
}

// Store returns the store to give the signer while holding the lease:
// the database's signer.Store whose AppendBatch also checks, in its
// transaction, that this lease is the current one (and has not ended),
// failing with an error wrapping signer.ErrLogConflict otherwise.
func (w *SignerWriter) Store() signer.Store { return leasedStore{w.db, w} }

// leasedStore is DB's signer.Store with appends fenced by a lease.
type leasedStore struct {
	*DB
	w *SignerWriter
}

func (s leasedStore) AppendBatch(ctx context.Context, b *signer.Batch) error {
	return s.DB.appendBatch(ctx, b, s.w)
}
