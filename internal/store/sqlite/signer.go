package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/signer"
)

var _ signer.Store = (*DB)(nil)

// signerSchema is the signer's migration: the log (leaves and tlog stored
// hashes), runs, decided calls, args salts, approvals, checkpoints, policy
// snapshots and a small key-value table (rollback state). Times are unix
// milliseconds.
const signerSchema = `CREATE TABLE signer_leaves (
	idx     INTEGER PRIMARY KEY,     -- leaf index, from 0, no gaps
	run     TEXT NOT NULL,
	run_seq INTEGER NOT NULL,
	type    TEXT NOT NULL,
	record  BLOB NOT NULL,           -- canonical signed record
	UNIQUE (run, run_seq)
) STRICT;
CREATE TABLE signer_hashes (
	idx  INTEGER PRIMARY KEY,        -- tlog stored hash index
	hash BLOB NOT NULL
) STRICT;
CREATE TABLE signer_runs (
	run           TEXT PRIMARY KEY,
	tenant        TEXT NOT NULL,
	agent         TEXT NOT NULL,
	session       TEXT NOT NULL,
	identity      TEXT NOT NULL,     -- JSON, as in run.registered
	created_at    INTEGER NOT NULL,
	closed_reason TEXT               -- NULL while open
) STRICT;
CREATE INDEX signer_runs_open ON signer_runs (closed_reason);
CREATE TABLE signer_calls (
	run        TEXT NOT NULL,
	call_id    TEXT NOT NULL,
	tool       TEXT NOT NULL,
	effect     TEXT NOT NULL,
	idx        INTEGER NOT NULL,     -- its call.decided leaf
	commitment TEXT NOT NULL,
	PRIMARY KEY (run, call_id)
) STRICT;
CREATE TABLE signer_salts (
	idx  INTEGER PRIMARY KEY,        -- leaf index of the committing record
	salt BLOB NOT NULL
) STRICT;
CREATE TABLE signer_approvals (
	id          TEXT PRIMARY KEY,
	run         TEXT NOT NULL,
	call_id     TEXT NOT NULL,
	tool        TEXT NOT NULL,
	idx         INTEGER NOT NULL,    -- its approval.requested leaf
	commitment  TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	state       TEXT NOT NULL,
	resolved_at INTEGER              -- NULL while pending
) STRICT;
CREATE INDEX signer_approvals_run ON signer_approvals (run);
CREATE TABLE signer_checkpoints (
	size       INTEGER PRIMARY KEY,
	note       BLOB NOT NULL,        -- signed note with cosignatures
	created_at INTEGER NOT NULL
) STRICT;
CREATE TABLE signer_policies (
	hash     TEXT PRIMARY KEY,       -- lowercase hex SHA-256 of snapshot
	snapshot BLOB NOT NULL
) STRICT;
CREATE TABLE signer_meta (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;`

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// The signer's inserts and checkExtends's reads, prepared at Open (see
// signerTxStatements): a group commit runs only these.
var (
	insLeaves = newRowInsert(`INSERT INTO signer_leaves (idx, run, run_seq, type, record)`, 5)
	insHashes = newRowInsert(`INSERT INTO signer_hashes (idx, hash)`, 2)
	insSalts  = newRowInsert(`INSERT INTO signer_salts (idx, salt)`, 2)
	insRuns   = newRowInsert(`INSERT INTO signer_runs (run, tenant, agent, session, identity, created_at)`, 6)
	insCalls  = newRowInsert(`INSERT INTO signer_calls (run, call_id, tool, effect, idx, commitment)`, 6)
	insDigest = newRowInsert(`INSERT INTO signer_arg_digests (idx, pos, kind, tool, digest)`, 5)
	insInbox  = newRowInsert(`INSERT INTO signer_inbox (data)`, 1)
)

const (
	sqlCloseRun = `UPDATE signer_runs SET closed_reason = ? WHERE run = ?`
	sqlApproval = `INSERT OR REPLACE INTO signer_approvals
	(id, run, call_id, tool, idx, commitment, created_at, expires_at, state, resolved_at) VALUES (?,?,?,?,?,?,?,?,?,?)`
	sqlMeta      = `INSERT OR REPLACE INTO signer_meta (name, value) VALUES (?, ?)`
	sqlInboxDone = `DELETE FROM signer_inbox WHERE id = ?`
	sqlLastLeaf  = `SELECT MAX(idx) FROM signer_leaves`
	// One MAX per run, an index lookup on (run, run_seq).
	sqlRunHead = `SELECT MAX(run_seq) FROM signer_leaves WHERE run = ?`
	// The stored hash of the last leaf, which the head cache is checked
	// against.
	sqlLeafHash = `SELECT hash FROM signer_hashes WHERE idx = ?`
)

// signerTxStatements are the statements AppendBatch runs.
var signerTxStatements = func() []string {
	out := []string{sqlCloseRun, sqlApproval, sqlMeta, sqlInboxDone, sqlLastLeaf, sqlRunHead, sqlLeafHash}
	for _, ins := range []rowInsert{insLeaves, insHashes, insSalts, insRuns, insCalls, insDigest, insInbox} {
		out = append(out, ins.statements()...)
	}
	return out
}()

// AppendBatch implements signer.Store. Its IMMEDIATE transaction holds
// the file's write lock from the start, so the check that b extends the
// stored log (signer.Batch.Extends; errors wrap signer.ErrLogConflict)
// and the inserts are one step even against another process writing the
// same file. Every statement it runs is prepared once.
func (d *DB) AppendBatch(ctx context.Context, b *signer.Batch) error {
	var size int64
	var heads map[string]int64
	err := d.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if size, heads, err = d.checkExtends(ctx, tx, b); err != nil {
			return err
		}
		if err := d.insertRows(ctx, tx, insLeaves, len(b.Leaves), func(i int) []any {
			l := &b.Leaves[i]
			return []any{l.Index, l.Run, l.RunSeq, l.Type, l.Record}
		}); err != nil {
			return fmt.Errorf("leaves: %w", err)
		}
		if err := d.insertRows(ctx, tx, insHashes, len(b.Hashes), func(i int) []any {
			return []any{b.Hashes[i].Index, b.Hashes[i].Hash[:]}
		}); err != nil {
			return fmt.Errorf("hashes: %w", err)
		}
		if err := d.insertRows(ctx, tx, insSalts, len(b.Salts), func(i int) []any {
			return []any{b.Salts[i].Index, b.Salts[i].Salt}
		}); err != nil {
			return fmt.Errorf("salts: %w", err)
		}
		if err := d.insertRows(ctx, tx, insRuns, len(b.NewRuns), func(i int) []any {
			r := &b.NewRuns[i]
			return []any{r.ID, r.Tenant, r.Agent, r.Session, string(r.Identity), ms(r.CreatedAt)}
		}); err != nil {
			return fmt.Errorf("runs: %w", err)
		}
		if err := d.execEach(ctx, tx, sqlCloseRun, len(b.ClosedRuns), func(i int) []any {
			return []any{b.ClosedRuns[i].Reason, b.ClosedRuns[i].ID}
		}); err != nil {
			return fmt.Errorf("close run: %w", err)
		}
		if err := d.insertRows(ctx, tx, insCalls, len(b.Calls), func(i int) []any {
			c := &b.Calls[i]
			return []any{c.Run, c.CallID, c.Tool, c.Effect, c.Index, c.Commitment}
		}); err != nil {
			return fmt.Errorf("calls: %w", err)
		}
		if err := d.execEach(ctx, tx, sqlApproval, len(b.Approvals), func(i int) []any {
			a := &b.Approvals[i]
			var resolved any
			if !a.ResolvedAt.IsZero() {
				resolved = ms(a.ResolvedAt)
			}
			return []any{a.ID, a.Run, a.CallID, a.Tool, a.Index, a.Commitment, ms(a.CreatedAt), ms(a.ExpiresAt), a.State, resolved}
		}); err != nil {
			return fmt.Errorf("approval: %w", err)
		}
		for k, v := range b.Meta {
			if err := d.execEach(ctx, tx, sqlMeta, 1, func(int) []any { return []any{k, v} }); err != nil {
				return fmt.Errorf("meta: %w", err)
			}
		}
		return d.appendInbox(ctx, tx, b)
	})
	if err != nil {
		d.heads.forget()
		return fmt.Errorf("sqlite: append signer batch: %w", err)
	}
	if len(b.Leaves) > 0 {
		d.heads.committed(size, heads, b)
	}
	return nil
}

// execEach runs the prepared statement query n times in tx, with args(i)
// the i-th run's values.
func (d *DB) execEach(ctx context.Context, tx *sql.Tx, query string, n int, args func(i int) []any) error {
	if n == 0 {
		return nil
	}
	st, err := d.stmts.inTx(ctx, tx, query)
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := st.ExecContext(ctx, args(i)...); err != nil {
			return err
		}
	}
	return nil
}

// checkExtends reads the stored tree size in tx and the heads of b's runs
// (from d.heads when nothing was written since this handle's last commit,
// else from tx) and checks that b extends them. It returns the size and
// heads it checked against.
func (d *DB) checkExtends(ctx context.Context, tx *sql.Tx, b *signer.Batch) (int64, map[string]int64, error) {
	if len(b.Leaves) == 0 {
		return 0, nil, b.Extends(0, nil) // refuses digests without their leaves
	}
	st, err := d.stmts.inTx(ctx, tx, sqlLastLeaf)
	if err != nil {
		return 0, nil, fmt.Errorf("tree size: %w", err)
	}
	var last sql.NullInt64
	if err := st.QueryRowContext(ctx).Scan(&last); err != nil {
		return 0, nil, fmt.Errorf("tree size: %w", err)
	}
	size := int64(0)
	if last.Valid {
		size = last.Int64 + 1
	}
	runs := b.LeafRuns()
	heads, cachedLast, missing := d.heads.lookup(size, runs)
	if len(heads) > 0 {
		// The cache is of a log of this size: trust it only if the
		// stored last leaf is the one it was left with.
		st, err := d.stmts.inTx(ctx, tx, sqlLeafHash)
		if err != nil {
			return 0, nil, fmt.Errorf("last leaf hash: %w", err)
		}
		var h []byte
		if err := st.QueryRowContext(ctx, tlog.StoredHashIndex(0, size-1)).Scan(&h); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, nil, fmt.Errorf("last leaf hash: %w", err)
		}
		if len(h) != len(cachedLast) || tlog.Hash(h) != cachedLast {
			d.heads.forget()
			heads, missing = make(map[string]int64, len(runs)), runs
		}
	}
	if len(missing) > 0 {
		if st, err = d.stmts.inTx(ctx, tx, sqlRunHead); err != nil {
			return 0, nil, fmt.Errorf("run heads: %w", err)
		}
	}
	for _, r := range missing {
		var h sql.NullInt64
		if err := st.QueryRowContext(ctx, r).Scan(&h); err != nil {
			return 0, nil, fmt.Errorf("run heads: %w", err)
		}
		if h.Valid {
			heads[r] = h.Int64
		}
	}
	return size, heads, b.Extends(size, heads)
}

// ReadHashes implements signer.Store.
func (d *DB) ReadHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	pos := make(map[int64][]int, len(indexes))
	args := make([]any, 0, len(indexes))
	for i, x := range indexes {
		if _, ok := pos[x]; !ok {
			args = append(args, x)
		}
		pos[x] = append(pos[x], i)
	}
	for start := 0; start < len(args); start += 500 {
		part := args[start:min(start+500, len(args))]
		rows, err := d.db.QueryContext(ctx,
			`SELECT idx, hash FROM signer_hashes WHERE idx IN (?`+strings.Repeat(",?", len(part)-1)+`)`, part...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: read hashes: %w", err)
		}
		n := 0
		for rows.Next() {
			var x int64
			var h []byte
			if err := rows.Scan(&x, &h); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: read hashes: %w", err)
			}
			for _, i := range pos[x] {
				copy(out[i][:], h)
			}
			n++
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlite: read hashes: %w", err)
		}
		if n != len(part) {
			return nil, fmt.Errorf("sqlite: read hashes: %w: %d of %d stored hashes", signer.ErrNotFound, n, len(part))
		}
	}
	return out, nil
}

// TreeSize implements signer.Store.
func (d *DB) TreeSize(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	if err := d.db.QueryRowContext(ctx, `SELECT MAX(idx) FROM signer_leaves`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: tree size: %w", err)
	}
	if !n.Valid {
		return 0, nil
	}
	return n.Int64 + 1, nil
}

func scanLeaves(rows *sql.Rows) ([]signer.Leaf, error) {
	defer rows.Close()
	var out []signer.Leaf
	for rows.Next() {
		var l signer.Leaf
		if err := rows.Scan(&l.Index, &l.Run, &l.RunSeq, &l.Type, &l.Record); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// RunLeaves implements signer.Store.
func (d *DB) RunLeaves(ctx context.Context, run string) ([]signer.Leaf, error) {
	rows, err := d.db.QueryContext(ctx,
		`SELECT idx, run, run_seq, type, record FROM signer_leaves WHERE run = ? ORDER BY run_seq`, run)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run leaves: %w", err)
	}
	out, err := scanLeaves(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run leaves: %w", err)
	}
	return out, nil
}

// LastLeaf implements signer.Store.
func (d *DB) LastLeaf(ctx context.Context, run string) (signer.Leaf, error) {
	var l signer.Leaf
	err := d.db.QueryRowContext(ctx,
		`SELECT idx, run, run_seq, type, record FROM signer_leaves WHERE run = ? ORDER BY run_seq DESC LIMIT 1`, run).
		Scan(&l.Index, &l.Run, &l.RunSeq, &l.Type, &l.Record)
	if errors.Is(err, sql.ErrNoRows) {
		return l, signer.ErrNotFound
	}
	if err != nil {
		return l, fmt.Errorf("sqlite: last leaf: %w", err)
	}
	return l, nil
}

const runCols = `run, tenant, agent, session, identity, created_at, COALESCE(closed_reason, '')`

func scanRun(s interface{ Scan(...any) error }) (signer.RunRow, error) {
	var r signer.RunRow
	var id string
	var created int64
	err := s.Scan(&r.ID, &r.Tenant, &r.Agent, &r.Session, &id, &created, &r.ClosedReason)
	r.Identity = []byte(id)
	r.CreatedAt = fromMS(created)
	return r, err
}

// Run implements signer.Store.
func (d *DB) Run(ctx context.Context, id string) (signer.RunRow, error) {
	r, err := scanRun(d.db.QueryRowContext(ctx, `SELECT `+runCols+` FROM signer_runs WHERE run = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, signer.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: run: %w", err)
	}
	return r, nil
}

// OpenRuns implements signer.Store.
func (d *DB) OpenRuns(ctx context.Context) ([]signer.RunRow, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+runCols+` FROM signer_runs WHERE closed_reason IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open runs: %w", err)
	}
	defer rows.Close()
	var out []signer.RunRow
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: open runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: open runs: %w", err)
	}
	return out, nil
}

// Calls implements signer.Store.
func (d *DB) Calls(ctx context.Context, run string) ([]signer.CallRow, error) {
	rows, err := d.db.QueryContext(ctx,
		`SELECT run, call_id, tool, effect, idx, commitment FROM signer_calls WHERE run = ?`, run)
	if err != nil {
		return nil, fmt.Errorf("sqlite: calls: %w", err)
	}
	defer rows.Close()
	var out []signer.CallRow
	for rows.Next() {
		var c signer.CallRow
		if err := rows.Scan(&c.Run, &c.CallID, &c.Tool, &c.Effect, &c.Index, &c.Commitment); err != nil {
			return nil, fmt.Errorf("sqlite: calls: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: calls: %w", err)
	}
	return out, nil
}

const approvalCols = `id, run, call_id, tool, idx, commitment, created_at, expires_at, state, COALESCE(resolved_at, 0)`

func scanApproval(s interface{ Scan(...any) error }) (signer.ApprovalRow, error) {
	var a signer.ApprovalRow
	var created, expires, resolved int64
	err := s.Scan(&a.ID, &a.Run, &a.CallID, &a.Tool, &a.Index, &a.Commitment, &created, &expires, &a.State, &resolved)
	a.CreatedAt, a.ExpiresAt = fromMS(created), fromMS(expires)
	if resolved != 0 {
		a.ResolvedAt = fromMS(resolved)
	}
	return a, err
}

// Approvals implements signer.Store.
func (d *DB) Approvals(ctx context.Context, run string) ([]signer.ApprovalRow, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+approvalCols+` FROM signer_approvals WHERE run = ?`, run)
	if err != nil {
		return nil, fmt.Errorf("sqlite: approvals: %w", err)
	}
	defer rows.Close()
	var out []signer.ApprovalRow
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: approvals: %w", err)
	}
	return out, nil
}

// Approval implements signer.Store.
func (d *DB) Approval(ctx context.Context, id string) (signer.ApprovalRow, error) {
	a, err := scanApproval(d.db.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM signer_approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, signer.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("sqlite: approval: %w", err)
	}
	return a, nil
}

// Salt implements signer.Store.
func (d *DB) Salt(ctx context.Context, index int64) ([]byte, error) {
	var s []byte
	err := d.db.QueryRowContext(ctx, `SELECT salt FROM signer_salts WHERE idx = ?`, index).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, signer.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: salt: %w", err)
	}
	return s, nil
}

// PutCheckpoint implements signer.Store.
func (d *DB) PutCheckpoint(ctx context.Context, c signer.CheckpointRow) error {
	_, err := d.exec(ctx,
		`INSERT INTO signer_checkpoints (size, note, created_at) VALUES (?, ?, ?)
		 ON CONFLICT (size) DO UPDATE SET note = excluded.note`, c.Size, c.Note, ms(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("sqlite: put checkpoint: %w", err)
	}
	return nil
}

// LatestCheckpoint implements signer.Store.
func (d *DB) LatestCheckpoint(ctx context.Context) (signer.CheckpointRow, error) {
	var c signer.CheckpointRow
	var created int64
	err := d.db.QueryRowContext(ctx,
		`SELECT size, note, created_at FROM signer_checkpoints ORDER BY size DESC LIMIT 1`).Scan(&c.Size, &c.Note, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return c, signer.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("sqlite: latest checkpoint: %w", err)
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// PutPolicy implements signer.Store.
func (d *DB) PutPolicy(ctx context.Context, hash string, snapshot []byte) error {
	if snapshot == nil {
		snapshot = []byte{}
	}
	_, err := d.exec(ctx,
		`INSERT INTO signer_policies (hash, snapshot) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING`, hash, snapshot)
	if err != nil {
		return fmt.Errorf("sqlite: put policy: %w", err)
	}
	return nil
}

// Policy implements signer.Store.
func (d *DB) Policy(ctx context.Context, hash string) ([]byte, error) {
	var s []byte
	err := d.db.QueryRowContext(ctx, `SELECT snapshot FROM signer_policies WHERE hash = ?`, hash).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, signer.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: policy: %w", err)
	}
	return s, nil
}

// Meta implements signer.Store.
func (d *DB) Meta(ctx context.Context, name string) (string, error) {
	var v string
	err := d.db.QueryRowContext(ctx, `SELECT value FROM signer_meta WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", signer.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: meta: %w", err)
	}
	return v, nil
}
