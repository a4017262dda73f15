// Package postgres is custody's store for several replicas: one PostgreSQL
// database reached through pgx, holding what the embedded SQLite store
// holds (keys, memory, gateway revocations, the witness's trees, the
// signer's log) behind the same interfaces, checked by the same
// conformance suite (internal/store/storetest).
//
// Every write that depends on a check (a lease epoch and the state it
// fences, a witness's stored size, the next leaf index of the log) runs
// the check and the write in one transaction that first takes the row
// lock or transaction-scoped advisory lock serializing it, so replicas
// sharing the database see each step as atomic. A write is durable when
// its call returns (PostgreSQL commits with synchronous_commit as the
// server is configured; custody does not lower it).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationLock is the advisory lock key that serializes schema
// migrations of replicas starting together ("custody" in ASCII).
const migrationLock int64 = 0x637573746f6479

// DB is an open custody database. It is safe for concurrent use.
type DB struct {
	pool *pgxpool.Pool
	// newID makes a new memory's ID: memory.NewID (tests replace it).
	newID func(time.Time) (int64, error)
	// searchMode is how a keyword recall is sent: searchExecMode, or
	// exec when the pool has no description cache.
	searchMode pgx.QueryExecMode
	// explicitRemember is set once a remember found that the server's
	// transactions do not default to read committed: from then on every
	// remember opens its transaction with BEGIN (see RememberMemory).
	explicitRemember atomic.Bool
}

// errSimpleProtocol refuses default_query_exec_mode=simple_protocol. That
// mode sends a batch as one simple query: its implicit transaction
// commits after the timeouts a remember sets have stopped applying (so a
// slow commit outlives the deadline), and every argument goes over as an
// untyped literal (so a bigint compared with 0 is read as an integer).
// Every other mode passes the conformance suites.
var errSimpleProtocol = errors.New("postgres: default_query_exec_mode=simple_protocol is not supported (its batches commit outside the timeouts custody sets); use the default, cache_describe, describe_exec or exec")

// errTLSUnchecked refuses an sslmode under which the password can reach
// a server whose certificate was not checked: prefer (libpq's and pgx's
// default when the URL sets none) and allow, which fall back to plaintext
// when the server declines TLS, and require, which does TLS with any
// certificate. Whoever sits on the path to the database can then ask for
// the password in clear. verify-full and verify-ca check the server;
// disable is plaintext, chosen on purpose (a trusted network).
var errTLSUnchecked = errors.New("postgres: the database URL's sslmode (prefer when unset) can send the password to a server whose certificate was not checked: set sslmode=verify-full (or verify-ca, with sslrootcert; disable is plaintext, for a trusted network)")

// tlsUnchecked reports whether one of cfg's connection attempts (the
// first and its fallbacks) would send the password to an unchecked
// server: attempts that mix TLS and plaintext (prefer, allow), or TLS
// that checks no certificate (require).
func tlsUnchecked(cfg *pgx.ConnConfig) bool {
	tls, plain := false, false
	for _, t := range append([]*pgconn.FallbackConfig{{TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...) {
		switch {
		case t.TLSConfig == nil:
			plain = true
		case t.TLSConfig.InsecureSkipVerify && t.TLSConfig.VerifyPeerCertificate == nil:
			return true // require: any certificate
		default:
			tls = true
		}
	}
	return tls && plain
}

// Open connects to the database at url, a PostgreSQL connection URL or
// key=value string as libpq reads it (e.g.
// "postgres://custody@db:5432/custody?sslmode=verify-full"), and brings
// its schema up to date. Tables are created in the connection's
// search_path schema (set search_path in the URL to use another).
// The pool holds at most 16 connections unless pool_max_conns says
// otherwise. default_query_exec_mode may be any of pgx's modes but
// simple_protocol (errSimpleProtocol); sslmode must be verify-full,
// verify-ca or disable (errTLSUnchecked). The URL, which may carry a
// password, is never included in an error.
func Open(ctx context.Context, url string) (*DB, error) {
	if url == "" {
		return nil, errors.New("postgres: database URL is required")
	}
	if err := checkAuthority(url); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can quote the URL, password included.
		return nil, errors.New("postgres: database URL is not a valid PostgreSQL connection string")
	}
	if cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol {
		return nil, errSimpleProtocol
	}
	if tlsUnchecked(cfg.ConnConfig) {
		return nil, errTLSUnchecked
	}
	if cfg.MaxConns < 16 && !strings.Contains(url, "pool_max_conns") { // the URL did not set it
		cfg.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect to %s: %w", where(cfg), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", where(cfg), err)
	}
	d := &DB{pool: pool, newID: memory.NewID, searchMode: searchExecMode}
	if cfg.ConnConfig.DescriptionCacheCapacity == 0 {
		d.searchMode = pgx.QueryExecModeExec
	}
	if err := d.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// where names the server of cfg for errors, never the password.
func where(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
}

// checkAuthority refuses a URL whose password would be misread as part of
// the host, port or path: an unencoded "/", "?" or "#" in the password
// ends the authority early, and what follows (the rest of the password)
// would be quoted back as a database name or port in errors and logs.
// Such a URL has an "@" after its authority.
func checkAuthority(u string) error {
	rest, ok := strings.CutPrefix(u, "postgres://")
	if !ok {
		if rest, ok = strings.CutPrefix(u, "postgresql://"); !ok {
			return nil // key=value form: no authority
		}
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 && strings.Contains(rest[i:], "@") {
		return errors.New(`postgres: the database URL has an "@" after its host: percent-encode "/", "?", "#" and "@" in the user name and password (e.g. %2F for /)`)
	}
	return nil
}

// Close closes every connection of the pool.
func (d *DB) Close() error {
	d.pool.Close()
	return nil
}

// Ping checks that the database answers (for readiness).
func (d *DB) Ping(ctx context.Context) error {
	if err := d.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// migrate applies the migrations the database has not seen yet, tracked
// in table custody_schema, all in one transaction holding an advisory
// lock, so that replicas starting together apply each migration once.
func (d *DB) migrate(ctx context.Context) error {
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("lock schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS custody_schema (version integer NOT NULL)`); err != nil {
			return fmt.Errorf("create custody_schema: %w", err)
		}
		var version int
		err := tx.QueryRow(ctx, "SELECT version FROM custody_schema").Scan(&version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, "INSERT INTO custody_schema (version) VALUES (0)"); err != nil {
				return fmt.Errorf("init custody_schema: %w", err)
			}
		case err != nil:
			return fmt.Errorf("read schema version: %w", err)
		}
		if version > len(migrations) {
			return fmt.Errorf("database schema version %d is newer than this binary's %d", version, len(migrations))
		}
		for ; version < len(migrations); version++ {
			if _, err := tx.Exec(ctx, migrations[version]); err != nil {
				return fmt.Errorf("migration %d: %w", version+1, err)
			}
		}
		_, err = tx.Exec(ctx, "UPDATE custody_schema SET version = $1", version)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// readCommitted is the isolation every transaction asks for explicitly:
// the locks the stores take (advisory locks, FOR UPDATE) serialize a check
// with its write only if the check's snapshot is taken after the lock is
// granted, which READ COMMITTED does per statement. Under REPEATABLE READ
// or SERIALIZABLE (a server, role or URL default) the snapshot would
// predate the wait, and a fenced-off writer could read a stale epoch.
var readCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// tx runs f in a READ COMMITTED transaction, whatever the server's
// default, and commits it if f returns nil; it rolls back otherwise.
func (d *DB) tx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, d.pool, readCommitted, f)
}
