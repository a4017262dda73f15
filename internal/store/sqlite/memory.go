package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

var _ memory.Store = (*DB)(nil)

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

const memoryColumns = `m.id, m.kind, m.key, m.text, m.tags, m.session, m.created_at, m.superseded_by, m.superseded_at`

// Statements whose plans TestMemoryQueryPlans checks. Each repeats the
// WHERE terms of the partial index it must use: SQLite uses a partial
// index only when the query's WHERE clause literally implies the index's.
const (
	sqlFindActiveByHash = `SELECT ` + memoryColumns + ` FROM memories m
		WHERE m.tenant = ? AND m.agent = ? AND m.hash = ? AND m.superseded_by IS NULL`
	sqlSupersede = `UPDATE memories SET superseded_by = ?, superseded_at = ?
		WHERE tenant = ? AND agent = ? AND kind = ? AND key = ? AND key <> '' AND superseded_by IS NULL
		RETURNING id`
)

type scanner interface{ Scan(dest ...any) error }

// memoryRow holds the columns of memoryColumns, in order, as scanned.
type memoryRow struct {
	id      int64
	kind    string
	key     string
	text    string
	tags    string
	session string
	created int64
	supBy   sql.NullInt64
	supAt   sql.NullInt64
}

// dest returns the Scan destinations of memoryColumns.
func (r *memoryRow) dest() []any {
	return []any{&r.id, &r.kind, &r.key, &r.text, &r.tags, &r.session, &r.created, &r.supBy, &r.supAt}
}

// memory returns the memory the row holds; an error if its tags are not
// a JSON array of strings.
func (r *memoryRow) memory() (memory.Memory, error) {
	m := memory.Memory{
		ID: memory.FormatID(r.id), Kind: r.kind, Key: r.key, Text: r.text, Session: r.session,
		CreatedAt: fromMillis(r.created),
	}
	if r.supBy.Valid {
		m.SupersededBy = memory.FormatID(r.supBy.Int64)
	}
	if r.supAt.Valid {
		m.SupersededAt = fromMillis(r.supAt.Int64)
	}
	if r.tags == "[]" {
		return m, nil // no tags: the common case, not worth a decode
	}
	if err := json.Unmarshal([]byte(r.tags), &m.Tags); err != nil {
		return memory.Memory{}, fmt.Errorf("decode tags of memory %s: %w", m.ID, err)
	}
	if len(m.Tags) == 0 {
		m.Tags = nil
	}
	return m, nil
}

func scanMemory(s scanner) (memory.Memory, error) {
	var r memoryRow
	if err := s.Scan(r.dest()...); err != nil {
		return memory.Memory{}, err
	}
	return r.memory()
}

// Statements of a remember and a forget.
const (
	sqlInsertMemory = `INSERT INTO memories (id, tenant, agent, kind, key, text, tags, hash, session, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertMemoryFTS = `INSERT INTO memories_fts (rowid, text, meta) VALUES (?, ?, ?)`
	sqlForget          = `DELETE FROM memories WHERE id = ? AND tenant = ? AND agent = ?`
	sqlForgetFTS       = `DELETE FROM memories_fts WHERE rowid = ?`
)

// memoryTxStatements are the statements that memory transactions run,
// prepared when the database is opened (see stmts.inTx).
var memoryTxStatements = []string{
	sqlFindActiveByHash, sqlSupersede, sqlInsertMemory, sqlInsertMemoryFTS, sqlForget, sqlForgetFTS,
	sqlGetState, sqlInsertLease, sqlUpdateLease, sqlPutState, sqlReleaseLease,
}

// insertMemory inserts m (its ID already set to id) and its index entry
// in tx.
func (d *DB) insertMemory(ctx context.Context, tx *sql.Tx, ns memory.Namespace, m memory.Memory, id int64) error {
	tags := m.Tags
	if tags == nil {
		tags = []string{}
	}
	tagsJSON, err := json.Marshal(tags)
	if err != nil {
		return fmt.Errorf("encode tags: %w", err)
	}
	ins, err := d.stmts.inTx(ctx, tx, sqlInsertMemory)
	if err != nil {
		return fmt.Errorf("insert memory: %w", err)
	}
	if _, err := ins.ExecContext(ctx, id, ns.Tenant, ns.Agent, m.Kind, m.Key, m.Text, string(tagsJSON),
		memory.ContentHash(m.Kind, m.Key, m.Text), m.Session, millis(m.CreatedAt)); err != nil {
		return fmt.Errorf("insert memory: %w", err)
	}
	meta := m.Key
	if len(m.Tags) > 0 {
		meta += " " + strings.Join(m.Tags, " ")
	}
	idx, err := d.stmts.inTx(ctx, tx, sqlInsertMemoryFTS)
	if err != nil {
		return fmt.Errorf("index memory: %w", err)
	}
	if _, err := idx.ExecContext(ctx, id, ftsText(m.Text), ftsText(meta)); err != nil {
		return fmt.Errorf("index memory: %w", err)
	}
	return nil
}

// sqliteConstraintPrimaryKey is SQLITE_CONSTRAINT_PRIMARYKEY, the
// extended result code of an insert whose rowid is taken.
const sqliteConstraintPrimaryKey = 1555

// RememberMemory implements memory.Store. A new memory's ID is
// memory.NewID of its CreatedAt; if that ID is taken, the whole
// transaction is run again with another (memory.RetryIDTaken).
func (d *DB) RememberMemory(ctx context.Context, ns memory.Namespace, m memory.Memory) (memory.Remembered, error) {
	res, err := memory.RetryIDTaken(func() (memory.Remembered, error) { return d.remember(ctx, ns, m) })
	if err != nil {
		return memory.Remembered{}, fmt.Errorf("sqlite: remember memory: %w", err)
	}
	return res, nil
}

func (d *DB) remember(ctx context.Context, ns memory.Namespace, m memory.Memory) (memory.Remembered, error) {
	var res memory.Remembered
	err := d.tx(ctx, func(tx *sql.Tx) error {
		find, err := d.stmts.inTx(ctx, tx, sqlFindActiveByHash)
		if err != nil {
			return fmt.Errorf("find duplicate: %w", err)
		}
		existing, err := scanMemory(find.QueryRowContext(ctx, ns.Tenant, ns.Agent, memory.ContentHash(m.Kind, m.Key, m.Text)))
		if err == nil {
			res = memory.Remembered{ID: existing.ID, Status: memory.StatusUnchanged, Memory: existing}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("find duplicate: %w", err)
		}
		id, err := d.newID(m.CreatedAt)
		if err != nil {
			return fmt.Errorf("new memory id: %w", err)
		}
		m.ID = memory.FormatID(id)
		res = memory.Remembered{ID: m.ID, Status: memory.StatusCreated, Memory: m}
		if m.Key != "" {
			// Supersede first: at most one active memory per kind and key.
			sup, err := d.stmts.inTx(ctx, tx, sqlSupersede)
			if err != nil {
				return fmt.Errorf("supersede: %w", err)
			}
			var old int64
			err = sup.QueryRowContext(ctx, id, millis(m.CreatedAt), ns.Tenant, ns.Agent, m.Kind, m.Key).Scan(&old)
			switch {
			case err == nil:
				res.Status, res.Supersedes = memory.StatusSuperseded, memory.FormatID(old)
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("supersede: %w", err)
			}
		}
		err = d.insertMemory(ctx, tx, ns, m, id)
		if resultCode(err) == sqliteConstraintPrimaryKey {
			return memory.ErrIDTaken
		}
		return err
	})
	return res, err
}

// ForgetMemory implements memory.Store.
func (d *DB) ForgetMemory(ctx context.Context, ns memory.Namespace, idStr string) error {
	id, ok := memory.ParseID(idStr)
	if !ok {
		return memory.ErrNotFound
	}
	err := d.tx(ctx, func(tx *sql.Tx) error {
		del, err := d.stmts.inTx(ctx, tx, sqlForget)
		if err != nil {
			return err
		}
		res, err := del.ExecContext(ctx, id, ns.Tenant, ns.Agent)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return memory.ErrNotFound
		}
		unindex, err := d.stmts.inTx(ctx, tx, sqlForgetFTS)
		if err != nil {
			return err
		}
		_, err = unindex.ExecContext(ctx, id)
		return err
	})
	if errors.Is(err, memory.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("sqlite: forget memory: %w", err)
	}
	return nil
}
