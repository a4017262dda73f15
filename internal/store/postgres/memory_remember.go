package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentcustody/custody/internal/memory"
)

// The statements of a remember. Whatever another writer does, the
// server, not this code, keeps the lookup and the writes consistent, so
// that a remember that returns an error was rolled back:
//   - sqlRememberStart checks that the transaction is read committed,
//     sets its lock_timeout and statement_timeout ($1, in milliseconds)
//     and then takes the namespace's lock ($2, $3: memoryLockClass and
//     namespaceLockKey, as sqlLockNamespace), in one statement: the
//     subquery's set_config calls run before the outer select list
//     (PostgreSQL never folds a subquery whose select list calls a
//     volatile function into the query around it, nor drops such a
//     column unread). Setting transaction_isolation to the level the
//     transaction already has does nothing; setting it to another once a
//     statement has run fails (SQLSTATE 25001), so a transaction that
//     is not read committed stops here;
//   - sqlLockActiveByHash looks up the active memory of the same content
//     and row-locks it, so that it stays active until the transaction
//     ends;
//   - sqlSupersede marks the active memory of the same kind and key
//     ($1 the new id, $2 the time, $3-$6 tenant, agent, kind, key, $7
//     the content hash) and returns its id, unless the content is
//     already active;
//   - sqlInsertMemory inserts; if the content is already active (the
//     lookup found it, or a writer that skipped the lock added it since)
//     memories_active_hash refuses it and the transaction is rolled
//     back: the remember is then StatusUnchanged if the lookup found the
//     memory, an error otherwise.
const (
	sqlRememberStart = `SELECT pg_advisory_xact_lock($2, hashtext($3)) FROM (SELECT
		set_config('transaction_isolation', 'read committed', true),
		set_config('lock_timeout', $1, true), set_config('statement_timeout', $1, true)) settings`
	sqlLockActiveByHash = sqlFindActiveByHash + ` FOR UPDATE`
	sqlSupersede        = `UPDATE memories SET superseded_by = $1, superseded_at = $2
		WHERE tenant = $3 AND agent = $4 AND kind = $5 AND key = $6 AND key <> '' AND superseded_by IS NULL
		AND NOT EXISTS (SELECT 1 FROM memories d
			WHERE d.tenant = $3 AND d.agent = $4 AND d.hash = $7 AND d.superseded_by IS NULL)
		RETURNING id`
)

// rememberTimeout is the longest a remember waits for its namespace's
// lock and runs each statement when ctx has no earlier deadline.
const rememberTimeout = 10 * time.Second

// endGrace is how much longer than its server-side timeouts a remember
// waits for the server's answer before it gives up on the connection,
// and how long a ROLLBACK after a failure may take.
const endGrace = 5 * time.Second

// RememberMemory implements memory.Store. Under the namespace's lock it
// looks for an active duplicate, supersedes the active memory of the same
// kind and key, and inserts, in one transaction sent in one round trip
// (a pipeline: the statements above, then Sync). The transaction is the
// pipeline's implicit one, which the server commits at the Sync if every
// statement succeeded and rolls back otherwise; it must be read
// committed (each statement's snapshot is taken after the ones before
// it, the lock's included). If the server's transactions default to
// another level (default_transaction_isolation), sqlRememberStart fails,
// and this and every later remember of d is sent between BEGIN
// ISOLATION LEVEL READ COMMITTED and COMMIT instead (two more
// statements, and the lock a statement of its own: at 10k memories a
// remember's p50 was 2.2-2.3 times BenchmarkRemember's floor that way,
// against 2.1 times).
//
// Once sent, the pipeline is not cancelled with ctx: a cancel request
// stops only the statement running at that moment, so the commit behind
// it could still run, and a remember reported as failed would be
// stored. Instead ctx's deadline (at most rememberTimeout) is given to
// the server as the transaction's lock_timeout and statement_timeout,
// so a remember that runs out of time fails on the server and is rolled
// back; a remember that returns an error was not committed, unless the
// connection itself failed (or the server did not answer within
// endGrace past the deadline). A ctx that is done before the pipeline
// is sent stops it.
//
// A new memory's ID is memory.NewID of its CreatedAt; if that ID is
// taken (by any namespace), the whole transaction is run again with
// another (memory.RetryIDTaken).
func (d *DB) RememberMemory(ctx context.Context, ns memory.Namespace, m memory.Memory) (memory.Remembered, error) {
	res, err := memory.RetryIDTaken(func() (memory.Remembered, error) {
		explicit := d.explicitRemember.Load()
		res, err := d.remember(ctx, ns, m, explicit)
		var pe *pgconn.PgError
		if !explicit && errors.As(err, &pe) && pe.Code == "25001" {
			d.explicitRemember.Store(true)
			return d.remember(ctx, ns, m, true)
		}
		return res, err
	})
	if err != nil {
		return memory.Remembered{}, fmt.Errorf("postgres: remember memory: %w", err)
	}
	return res, nil
}

// remember runs one remember's pipeline; explicit wraps it in BEGIN
// ISOLATION LEVEL READ COMMITTED and COMMIT.
func (d *DB) remember(ctx context.Context, ns memory.Namespace, m memory.Memory, explicit bool) (memory.Remembered, error) {
	id, err := d.newID(m.CreatedAt)
	if err != nil {
		return memory.Remembered{}, fmt.Errorf("new memory id: %w", err)
	}
	m.ID = memory.FormatID(id)
	args, err := memoryInsertArgs(ns, m, id)
	if err != nil {
		return memory.Remembered{}, err
	}
	hash := memory.ContentHash(m.Kind, m.Key, m.Text)

	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return memory.Remembered{}, err
	}
	defer conn.Release()
	budget := rememberTimeout
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl))
	}
	if err := ctx.Err(); err != nil {
		return memory.Remembered{}, err
	}
	if budget < time.Millisecond {
		return memory.Remembered{}, context.DeadlineExceeded
	}

	b := &pgx.Batch{}
	if explicit {
		b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	}
	b.Queue(sqlRememberStart, strconv.FormatInt(budget.Milliseconds(), 10), memoryLockClass, namespaceLockKey(ns))
	b.Queue(sqlLockActiveByHash, ns.Tenant, ns.Agent, hash)
	if m.Key != "" {
		b.Queue(sqlSupersede, id, millisUTC(m.CreatedAt), ns.Tenant, ns.Agent, m.Kind, []byte(m.Key), hash)
	}
	b.Queue(sqlInsertMemory, args...)
	if explicit {
		b.Queue(`COMMIT`)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget+endGrace)
	defer cancel()
	res, err := readRemember(conn.SendBatch(sctx, b), m, explicit)
	if conn.Conn().PgConn().TxStatus() != 'I' {
		// After a failed statement (the insert of content already
		// active included) of an explicit transaction the server
		// skipped the rest of the pipeline, COMMIT included, and left
		// the transaction open (failed); an implicit one ends at the
		// Sync. If ROLLBACK fails too, Release closes the connection
		// instead of pooling it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endGrace)
		conn.Exec(rctx, `ROLLBACK`)
		cancel()
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "memories_pkey":
		return memory.Remembered{}, memory.ErrIDTaken
	case err != nil:
		return memory.Remembered{}, err
	}
	return res, nil
}

// readRemember reads the results of remember's pipeline for m (its ID
// set; explicit as sent) and closes br, which reports the implicit
// transaction's commit. If the same content is active, the insert fails
// and the transaction is rolled back (an explicit one is left failed:
// the caller rolls it back).
func readRemember(br pgx.BatchResults, m memory.Memory, explicit bool) (memory.Remembered, error) {
	res, err := readRememberResults(br, m, explicit)
	if cerr := br.Close(); err == nil && res.Status != memory.StatusUnchanged && cerr != nil {
		err = cerr
	}
	if err != nil {
		return memory.Remembered{}, err
	}
	return res, nil
}

func readRememberResults(br pgx.BatchResults, m memory.Memory, explicit bool) (memory.Remembered, error) {
	if explicit {
		if _, err := br.Exec(); err != nil {
			return memory.Remembered{}, fmt.Errorf("begin: %w", err)
		}
	}
	if _, err := br.Exec(); err != nil {
		return memory.Remembered{}, fmt.Errorf("lock namespace: %w", err)
	}
	existing, err := scanMemory(br.QueryRow())
	duplicate := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return memory.Remembered{}, fmt.Errorf("find duplicate: %w", err)
	}
	res := memory.Remembered{ID: m.ID, Status: memory.StatusCreated, Memory: m}
	if m.Key != "" {
		var old int64
		switch err := br.QueryRow().Scan(&old); {
		case err == nil:
			res.Status, res.Supersedes = memory.StatusSuperseded, memory.FormatID(old)
		case !errors.Is(err, pgx.ErrNoRows):
			return memory.Remembered{}, fmt.Errorf("supersede: %w", err)
		}
	}
	_, err = br.Exec()
	var pe *pgconn.PgError
	switch {
	case duplicate && errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "memories_active_hash":
		return memory.Remembered{ID: existing.ID, Status: memory.StatusUnchanged, Memory: existing}, nil
	case err != nil:
		return memory.Remembered{}, fmt.Errorf("insert memory: %w", err)
	}
	if explicit {
		if _, err := br.Exec(); err != nil {
			return memory.Remembered{}, fmt.Errorf("commit: %w", err)
		}
	}
	return res, nil
}
