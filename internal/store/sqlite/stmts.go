package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// stmts holds statements prepared once on the *sql.DB and reused, keyed by
// their SQL text. modernc.org/sqlite parses and plans a statement on every
// call that passes SQL text; a prepared statement is parsed once per
// connection and then only bound and stepped. database/sql prepares a
// statement on each pooled connection the first time it runs there.
//
// The keys must come from a fixed set of statements in this package
// (never text built from values), so the cache stays small. It is safe
// for concurrent use.
type stmts struct {
	db *sql.DB

	mu     sync.RWMutex
	m      map[string]*sql.Stmt
	closed bool
}

func newStmts(db *sql.DB) *stmts { return &stmts{db: db, m: make(map[string]*sql.Stmt)} }

// errStmtsClosed is returned by get after close.
var errStmtsClosed = errors.New("database is closed")

// get returns the prepared statement of query, preparing it on first
// use. It never holds the lock while preparing, which takes a connection
// from the pool: a transaction that holds a connection and waits for the
// lock must not wait for a connection too.
func (s *stmts) get(ctx context.Context, query string) (*sql.Stmt, error) {
	s.mu.RLock()
	st, ok := s.m[query]
	s.mu.RUnlock()
	if ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		st.Close()
		return nil, errStmtsClosed
	}
	if prev, ok := s.m[query]; ok {
		st.Close() // another caller prepared it first
		return prev, nil
	}
	s.m[query] = st
	return st, nil
}

// prepare prepares queries ahead of their first use (see inTx).
func (s *stmts) prepare(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		if _, err := s.get(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// inTx returns the prepared statement of query bound to tx; it is closed
// when tx ends. A statement not prepared yet (see prepare) is prepared on
// tx's connection for this transaction only: taking a second connection
// while tx holds one could wait forever for the pool.
func (s *stmts) inTx(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	s.mu.RLock()
	st, ok := s.m[query]
	s.mu.RUnlock()
	if !ok {
		return tx.PrepareContext(ctx, query)
	}
	return tx.StmtContext(ctx, st), nil
}

// close closes every statement; get fails afterwards.
func (s *stmts) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for q, st := range s.m {
		errs = append(errs, st.Close())
		delete(s.m, q)
	}
	return errors.Join(errs...)
}
