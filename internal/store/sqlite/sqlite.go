// Package sqlite is custody's embedded store: one SQLite database file
// (modernc.org/sqlite, pure Go) in the data directory, in WAL mode with
// synchronous=FULL so that a write is durable when its call returns.
// Temporary tables, sorts and statement journals are kept in memory
// (temp_store=MEMORY): a multi-row insert in a transaction would
// otherwise write its statement journal to a temporary file. The
// write-ahead log is checkpointed into the database file once it holds
// walAutocheckpoint pages.
//
// A [DB] implements the store interfaces that the domain packages declare
// (apikey.Store, memory.Store). Write transactions begin IMMEDIATE, so a
// check and the write that depends on it (a lease epoch and the state it
// fences) are one atomic step even across processes sharing the file.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// FileName is the database file inside the data directory.
const FileName = "custody.db"

// walAutocheckpoint is the write-ahead log's size, in pages (4 KiB), at
// which the commit that reaches it copies the log into the database file
// (SQLite's default is 1,000). A checkpoint copies each page once however
// many commits rewrote it, and the signer's group commits rewrite the
// same pages (each open run's last index page) commit after commit: at
// 128 clients the server's CPU per decide was 5 % lower with 4,000 than
// with 1,000 (median of seven interleaved rounds, -2 % to 11 %), and its
// decides/s 6 % higher. The log file grows to about 16 MiB
// and stays that size; opening the database after a crash replays it.
const walAutocheckpoint = 4000

// DB is an open custody database. It is safe for concurrent use.
type DB struct {
	db *sql.DB
	// stmts are the hot statements, prepared once (see stmts).
	stmts *stmts
	// heads is what this handle's own signer commits left in the log
	// (see headCache).
	heads headCache
	// wlock orders this handle's writes (see writeLock).
	wlock writeLock
	// newID makes a new memory's ID: memory.NewID (tests replace it).
	newID func(time.Time) (int64, error)
}

// Open opens (creating if needed) dir/custody.db and brings its schema up
// to date. dir is created with mode 0700 if missing.
func Open(ctx context.Context, dir string) (*DB, error) {
	if dir == "" {
		return nil, errors.New("sqlite: data directory is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)", "temp_store(MEMORY)", fmt.Sprintf("wal_autocheckpoint(%d)", walAutocheckpoint)} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	// The path is escaped into the URI: unescaped, a '#' in it would end
	// the file name and a '?' begin the parameters, and the database would
	// be another file, outside dir.
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	if err := pingOpening(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	d := &DB{db: db, stmts: newStmts(db), wlock: newWriteLock(), newID: memory.NewID}
	if err := d.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := d.stmts.prepare(ctx, slices.Concat(memoryTxStatements, signerTxStatements)...); err != nil {
		d.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return d, nil
}

// pingOpening opens the first connection. Switching a new file to WAL
// (the journal_mode pragma every connection runs) answers SQLITE_BUSY
// at once, without the busy handler, while another process or handle is
// doing the same; replicas starting together on one fresh data directory
// hit that. It is retried every 20 ms for up to the busy timeout (10 s).
func pingOpening(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil || resultCode(err)&0xff != sqliteBusy || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// resultCode is the SQLite result code that err carries (extended when
// the driver reports it), or 0 if err is not from SQLite.
func resultCode(err error) int {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code()
	}
	return 0
}

// sqliteBusy is SQLITE_BUSY, the primary result code of "database is
// locked" (extended codes keep it in the low byte).
const sqliteBusy = 5

// Close closes the database.
func (d *DB) Close() error {
	return errors.Join(d.stmts.close(), d.db.Close())
}

// Ping checks that the database answers (for readiness).
func (d *DB) Ping(ctx context.Context) error {
	var one int
	if err := d.db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// migrate applies the migrations the database has not seen yet, tracked in
// PRAGMA user_version, one per IMMEDIATE transaction that also reads the
// version, so that replicas starting together on one file apply each
// migration once.
func (d *DB) migrate(ctx context.Context) error {
	for {
		var done bool
		err := d.tx(ctx, func(tx *sql.Tx) error {
			var version int
			if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			if version > len(migrations) {
				return fmt.Errorf("database schema version %d is newer than this binary's %d", version, len(migrations))
			}
			if version == len(migrations) {
				done = true
				return nil
			}
			if _, err := tx.ExecContext(ctx, migrations[version]); err != nil {
				return fmt.Errorf("migration %d: %w", version+1, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1))
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		if done {
			return nil
		}
	}
}

// tx runs f in a write transaction and commits it if f returns nil. The
// transaction runs under the handle's write lock (see writeLock), taken
// before BEGIN IMMEDIATE; if ctx ends while waiting for it, tx returns
// ctx.Err(). f must not start another write of d (d.tx, d.exec).
func (d *DB) tx(ctx context.Context, f func(*sql.Tx) error) error {
	if err := d.wlock.lock(ctx); err != nil {
		return err
	}
	defer d.wlock.unlock()
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
