package signer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify"
)

// appendReq is one caller's work for the group committer. fn runs on the
// committer goroutine with s.mu held, in queue order, so that a check and
// the records that depend on it (the run is open; the approval is
// unconsumed) are one step. Records fn appends are committed even when fn
// returns an error (a refusal that is recorded); the caller gets fn's
// error only after the commit, or the commit's error.
type appendReq struct {
	fn   func(t *txn) error
	err  error
	done chan struct{}
}

// txn is a batch: built by the append loop, then committed by the commit
// goroutine while the next batch is built.
type txn struct {
	s     *Signer
	b     Batch
	now   time.Time // when the request being run was taken
	after []func()  // run after the commit, with s.mu held
	reqs  []*appendReq
	gen   uint64   // s.gen when begun: a batch built on state that a failed commit invalidated is never committed
	head  treeHead // the tree once this batch is committed (size 0: unchanged)
}

// submit queues fn and waits until its batch is durable.
func (s *Signer) submit(ctx context.Context, fn func(t *txn) error) error {
	r := &appendReq{fn: fn, done: make(chan struct{})}
	s.qmu.RLock()
	if s.stopping {
		s.qmu.RUnlock()
		return ErrClosed
	}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		s.qmu.RUnlock()
		return ctx.Err()
	}
	s.qmu.RUnlock()
	<-r.done // once queued, the outcome is decided by the committer
	return r.err
}

// appendLoop is the group committer. A request is run (checked, signed
// and added to the in-memory log, in queue order) as soon as it is
// taken, into the batch being built; the batch is sealed and handed to
// the commit goroutine once that goroutine is free, which commits it in
// one transaction and then acknowledges its requests. So a commit writes
// every request that arrived while the commit before it ran, at most
// MaxBatch, and signing overlaps the commit (a two-stage pipeline using
// one core each); batches commit, and are acknowledged, in the order
// they were built. Once the commit goroutine is free, a batch waits up to
// CommitWindow for the callers the last commit acknowledged, while fewer
// of them have come back than it acknowledged (see Options.CommitWindow).
func (s *Signer) appendLoop() {
	defer close(s.loopDone)
	commits := make(chan *txn)
	idle := make(chan struct{}) // the commit goroutine waits for a batch
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		idle <- struct{}{}
		for t := range commits {
			s.commitBatch(t)
			// Free before acknowledging: a caller acknowledged here can
			// only come back after the loop knows the commit ended, so
			// the loop counts it as come back.
			idle <- struct{}{}
			t.ack()
		}
	}()
	// Two batches alternate: one is committed while the other is built.
	// The commit goroutine asks for a batch only once it has finished
	// the one before, so a batch is never rebuilt while it is committed.
	txns := [2]*txn{{s: s}, {s: s}}
	t, next := txns[0], 1
	t.begin()
	window := time.NewTimer(time.Hour)
	window.Stop()
	var (
		free, stopping bool
		sent, acked    int  // requests in the batch last sent; in the one last acknowledged
		back           int  // requests taken since the last acknowledgement
		waiting        bool // window runs
		waited         bool // window ran out for this batch
	)
	for {
		if free && len(t.reqs) > 0 {
			if !stopping && !waited && back < acked && len(t.reqs) < s.opts.MaxBatch && s.opts.CommitWindow > 0 {
				if !waiting {
					window.Reset(s.opts.CommitWindow)
					waiting = true
				}
			} else {
				if waiting {
					window.Stop()
				}
				waiting, waited = false, false
				s.seal(t)
				commits <- t
				free, sent = false, len(t.reqs)
				t, next = txns[next], next^1
				t.begin()
				continue
			}
		}
		if stopping && len(t.reqs) == 0 {
			// Stopping: commit what is still queued, then stop.
			select {
			case r := <-s.reqs:
				s.add(t, r)
				continue
			default:
			}
			if !free {
				<-idle
			}
			close(commits)
			<-committed
			return
		}
		in, idleC, stopC := s.reqs, idle, s.stop
		var windowC <-chan time.Time
		if len(t.reqs) >= s.opts.MaxBatch {
			in = nil
		}
		if free {
			idleC = nil
		}
		if stopping {
			stopC = nil
		}
		if waiting {
			windowC = window.C
		}
		select {
		case r := <-in:
			s.add(t, r)
			back++
		case <-idleC:
			free, acked, back = true, sent, 0
		case <-stopC:
			stopping = true
		case <-windowC:
			waiting, waited = false, true
		}
	}
}

// begin empties t for a new batch.
func (t *txn) begin() {
	t.b.reset()
	t.after = t.after[:0]
	t.reqs = t.reqs[:0]
	t.head = treeHead{}
}

// add runs r's fn into t with s.mu held. A request taken after a failed
// commit invalidated the state t was begun on is refused without running:
// its records would extend state that was reloaded, and t is never
// committed.
func (s *Signer) add(t *txn, r *appendReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(t.reqs) == 0 {
		t.gen = s.gen
	}
	t.reqs = append(t.reqs, r)
	if t.gen != s.gen {
		r.err = fmt.Errorf("an earlier batch failed to commit: %w", s.failure)
		return
	}
	t.now = s.opts.Now()
	r.err = r.fn(t)
}

// seal notes the tree t's records leave, keeping only its frontier of
// hashes in memory, with s.mu held.
func (s *Signer) seal(t *txn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(t.b.Leaves) == 0 {
		return
	}
	root, err := tlog.TreeHash(s.size, s.memReader())
	if err != nil {
		// The hashes of the frontier are in memory; this is a bug. The
		// batch still commits (its records are signed and valid) but the
		// committed head is not advanced until a later batch computes it.
		s.log.Error("tree hash", "err", err)
	} else {
		t.head = treeHead{s.size, root}
	}
	keep := make(map[int64]tlog.Hash, 64)
	for _, x := range frontier(s.size) {
		keep[x] = s.hashes[x]
	}
	s.hashes = keep
}

// commitBatch commits t durably and sets its requests' outcomes (ack
// then wakes them). A batch built before a failed commit's reload is
// refused without being written: it extends state that was never
// committed.
func (s *Signer) commitBatch(t *txn) {
	s.mu.Lock()
	stale := t.gen != s.gen
	s.mu.Unlock() // s.failure is written only by this goroutine
	var err error
	switch {
	case stale:
		err = fmt.Errorf("an earlier batch failed to commit: %w", s.failure)
	case len(t.b.Leaves) > 0 || len(t.b.Approvals) > 0 || len(t.b.Meta) > 0:
		start := time.Now()
		err = s.store.AppendBatch(context.Background(), &t.b)
		if err == nil && s.opts.OnCommit != nil {
			s.opts.OnCommit(len(t.b.Leaves), time.Since(start))
		}
	}
	s.mu.Lock()
	if err != nil {
		if !stale {
			if errors.Is(err, ErrLogConflict) {
				// Another writer holds the log: our size, run heads and
				// chains are stale. Refuse writes until a restart rather
				// than re-sign on top of its records.
				s.conflict = true
				s.fail()
				from := int64(-1)
				if len(t.b.Leaves) > 0 {
					from = t.b.Leaves[0].Index
				}
				s.log.Error("LOG CONFLICT: another writer appended to the log; this signer refuses all writes until it is restarted",
					"err", err, "records", len(t.b.Leaves), "first_index", from)
			} else {
				s.log.Error("group commit failed; reloading state from the store", "err", err, "records", len(t.b.Leaves))
			}
			if lerr := s.load(context.Background()); lerr != nil {
				s.log.Error("reload failed; refusing writes", "err", lerr)
				s.closed = true
				s.fail()
			}
			s.gen++
			s.failure = err
		}
		for _, r := range t.reqs {
			r.err = fmt.Errorf("commit: %w", err)
		}
	} else {
		if t.head.size > 0 {
			s.head = t.head
		}
		for _, f := range t.after {
			f()
		}
	}
	s.mu.Unlock()
}

// ack wakes t's callers once t is committed (or refused).
func (t *txn) ack() {
	for _, r := range t.reqs {
		close(r.done)
	}
}

// append signs the next record of rs and adds it to the batch. State
// changes only when it succeeds.
func (t *txn) append(rs *runState, typ string, body map[string]any) (Leaf, error) {
	s := t.s
	if s.closed {
		return Leaf{}, ErrClosed
	}
	if s.conflict {
		return Leaf{}, ErrLogConflict
	}
	if s.rollback && typ != verify.TypeRollbackDetected && typ != verify.TypeForkDetected {
		return Leaf{}, ErrLogRollback
	}
	rec := &verify.Record{
		Log: s.opts.Origin, Index: s.size, Run: rs.row.ID, RunSeq: rs.seq, Prev: rs.prev,
		Type: typ, Time: t.now, Body: body,
	}
	raw, err := verify.SignRecord(rec, s.key().signer)
	if err != nil {
		return Leaf{}, fmt.Errorf("sign %s record: %w", typ, err)
	}
	hs, err := tlog.StoredHashes(s.size, raw, s.memReader())
	if err != nil {
		return Leaf{}, fmt.Errorf("stored hashes: %w", err)
	}
	base := tlog.StoredHashCount(s.size)
	for i, h := range hs {
		s.hashes[base+int64(i)] = h
		t.b.Hashes = append(t.b.Hashes, IndexedHash{Index: base + int64(i), Hash: h})
	}
	l := Leaf{Index: s.size, Run: rs.row.ID, RunSeq: rs.seq, Type: typ, Record: raw}
	t.b.Leaves = append(t.b.Leaves, l)
	s.size++
	rs.seq++
	rs.prev = verify.ChainHash(raw)
	return l, nil
}
