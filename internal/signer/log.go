package signer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"
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

// Checkpoint signs a checkpoint of the committed tree if it grew since the
// latest stored one, sends it to the witnesses and stores it with their
// cosignatures. It returns the latest checkpoint.
func (s *Signer) Checkpoint(ctx context.Context) (CheckpointRow, error) {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	s.mu.Lock()
	head, sg, conflict := s.head, s.committedKey().signer, s.conflict
	s.mu.Unlock()
	if conflict {
		return CheckpointRow{}, fmt.Errorf("checkpoint: %w", ErrLogConflict)
	}
	latest, err := s.store.LatestCheckpoint(ctx)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return latest, fmt.Errorf("checkpoint: %w", err)
	}
	if err == nil && latest.Size >= head.size && !(len(s.opts.Witnesses) > 0 && latest.Size == head.size && !s.witnessesAt(head.size)) {
		return latest, nil
	}
	if head.size == 0 {
		return CheckpointRow{}, fmt.Errorf("checkpoint: %w: empty log", ErrNotFound)
	}
	text, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: s.opts.Origin, TreeSize: head.size, Root: head.root})
	if err != nil {
		return CheckpointRow{}, fmt.Errorf("checkpoint: %w", err)
	}
	signed, err := note.Sign(&note.Note{Text: string(text)}, sg)
	if err != nil {
		return CheckpointRow{}, fmt.Errorf("checkpoint: sign: %w", err)
	}
	out := append([]byte(nil), signed...)
	var rollback int64 = -1
	var fork func() error
	for i, w := range s.opts.Witnesses {
		cosig, ws, err := s.addToWitness(ctx, i, w, head.size, signed)
		if err != nil {
			switch {
			case ws > head.size:
				rollback = ws
			case fork == nil && s.opts.WitnessFork(err):
				fork = func() error { return s.detectFork(ctx, i, ws, head, err) }
			}
			s.log.WarnContext(ctx, "witness refused checkpoint", "witness", i, "size", head.size, "witness_size", ws, "err", err)
			continue
		}
		s.wsize[i] = head.size
		out = append(out, s.checkCosignatures(ctx, i, text, cosig)...)
	}
	row := CheckpointRow{Size: head.size, Note: out, CreatedAt: s.opts.Now()}
	if err := s.store.PutCheckpoint(ctx, row); err != nil {
		return CheckpointRow{}, fmt.Errorf("checkpoint: %w", err)
	}
	if rollback >= 0 {
		return row, s.detectRollback(ctx, rollback, head.size)
	}
	if fork != nil {
		return row, fork()
	}
	return row, nil
}

// checkCosignatures returns the lines of cosig, witness i's answer for the
// checkpoint text, that verify with a trusted witness key (C2SP
// tlog-cosignature/v1, checked as a note with that one signature). Every
// other line is dropped, logged (the witness, its error naming the key; no
// signature bytes) and counted with Options.OnBadCosignature.
func (s *Signer) checkCosignatures(ctx context.Context, i int, text, cosig []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(cosig, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		msg := append(append(append(append([]byte(nil), text...), '\n'), line...), '\n')
		if _, err := note.Open(msg, s.witnessKeys); err != nil {
			s.log.WarnContext(ctx, "witness cosignature does not verify with a trusted witness key; dropped",
				"witness", i, "err", err)
			if s.opts.OnBadCosignature != nil {
				s.opts.OnBadCosignature(i)
			}
			continue
		}
		out = append(append(out, line...), '\n')
	}
	return out
}

// probeWitnesses is the start-up check of an empty log: it offers each
// witness a signed checkpoint of the empty tree, so that a witness that has
// cosigned a larger tree of this log answers with its size. A database
// that was lost or restored to empty is then detected as a rollback like
// any other. The checkpoint's root is the RFC 6962 empty-tree hash
// ([verify.EmptyTreeHash]). Nothing is stored.
func (s *Signer) probeWitnesses(ctx context.Context) error {
	text, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: s.opts.Origin, TreeSize: 0, Root: verify.EmptyTreeHash()})
	if err != nil {
		return fmt.Errorf("probe witnesses: %w", err)
	}
	s.mu.Lock()
	sg := s.committedKey().signer
	s.mu.Unlock()
	signed, err := note.Sign(&note.Note{Text: string(text)}, sg)
	if err != nil {
		return fmt.Errorf("probe witnesses: sign: %w", err)
	}
	for i, w := range s.opts.Witnesses {
		_, err := w.AddCheckpoint(ctx, 0, nil, signed)
		if err == nil {
			continue
		}
		if ws, ok := s.opts.WitnessSize(err); ok && ws > 0 {
			return s.detectRollback(ctx, ws, 0)
		}
		s.log.WarnContext(ctx, "witness refused the empty-tree probe", "witness", i, "err", err)
	}
	return nil
}

// witnessesAt reports whether every witness has cosigned size.
func (s *Signer) witnessesAt(size int64) bool {
	for _, ws := range s.wsize {
		if ws != size {
			return false
		}
	}
	return true
}

// addToWitness sends signed to witness i, retrying once from the size the
// witness reports holding. It returns the cosignature lines, or the
// witness's size (-1 if unknown; for a fork answer, the size the witness
// was asked to extend, which it holds) and the error.
func (s *Signer) addToWitness(ctx context.Context, i int, w Witness, size int64, signed []byte) ([]byte, int64, error) {
	old := s.wsize[i]
	for attempt := 0; ; attempt++ {
		var proof tlog.TreeProof
		if old > 0 && old < size {
			p, err := tlog.ProveTree(size, old, s.storeReader(ctx))
			if err != nil {
				return nil, -1, fmt.Errorf("consistency proof %d→%d: %w", old, size, err)
			}
			proof = p
		}
		cosig, err := w.AddCheckpoint(ctx, old, proof, signed)
		if err == nil {
			return cosig, size, nil
		}
		ws, ok := s.opts.WitnessSize(err)
		if !ok {
			if s.opts.WitnessFork(err) {
				return nil, old, err
			}
			return nil, -1, err
		}
		if ws > size || ws == old || attempt > 0 {
			return nil, ws, err
		}
		old = ws
	}
}

// detectRollback records log.rollback_detected in "_log" and refuses
// writes from then on (persisted) until [Signer.AcknowledgeRollback].
func (s *Signer) detectRollback(ctx context.Context, witnessSize, logSize int64) error {
	if s.RollbackDetected() {
		return ErrLogRollback
	}
	s.log.ErrorContext(ctx, "log rollback detected: a witness holds a larger tree; refusing writes",
		"witness_size", witnessSize, "log_size", logSize)
	return s.refuseWrites(ctx, verify.TypeRollbackDetected, map[string]any{"witness_size": witnessSize, "log_size": logSize})
}

// detectFork records log.fork_detected in "_log" and refuses writes from
// then on (persisted) until [Signer.AcknowledgeRollback], as for a
// rollback: witness i answered answer (see Options.WitnessFork) to the
// checkpoint of head, having cosigned a tree of witnessSize leaves that is
// not this log's. The record keeps the evidence this side holds: the
// witness (its index in Options.Witnesses), both sizes and the log's root;
// the witness's answer is logged, never signed (its text is the witness's).
func (s *Signer) detectFork(ctx context.Context, i int, witnessSize int64, head treeHead, answer error) error {
	if s.RollbackDetected() {
		return ErrLogRollback
	}
	s.log.ErrorContext(ctx, "LOG FORK DETECTED: a witness has cosigned a tree this log does not extend (a restored log that regrew, or equivocation); refusing writes until an operator acknowledges",
		"witness", i, "witness_size", witnessSize, "log_size", head.size, "log_root", head.root.String(), "err", answer)
	return s.refuseWrites(ctx, verify.TypeForkDetected, map[string]any{
		"witness": int64(i), "witness_size": witnessSize, "log_size": head.size,
		"log_root": head.root.String(),
	})
}

// refuseWrites records a typ record (log.rollback_detected or log.fork_detected)
// with body in "_log" and refuses writes from then on until
// [Signer.AcknowledgeRollback]. The refusal is persisted (meta "rollback",
// body plus "type") in the same commit, so a restart keeps it. It returns
// ErrLogRollback, or why the record could not be committed.
func (s *Signer) refuseWrites(ctx context.Context, typ string, body map[string]any) error {
	m := map[string]any{"type": typ}
	for k, v := range body {
		m[k] = v
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("record %s: %w", typ, err)
	}
	err = s.submit(ctx, func(t *txn) error {
		if s.rollback {
			return nil
		}
		s.rollback, s.halt = true, typ
		if _, err := t.append(s.logRun, typ, body); err != nil {
			s.rollback, s.halt = false, ""
			return err
		}
		t.b.Meta = map[string]string{metaRollback: string(meta)}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %s: %w", typ, err)
	}
	return ErrLogRollback
}

// AcknowledgeRollback lets writes resume after an operator has dealt with
// a detected rollback (restored the log or accepted the fork).
func (s *Signer) AcknowledgeRollback(ctx context.Context) error {
	return s.submit(ctx, func(t *txn) error {
		if !s.rollback {
			return nil
		}
		halt := s.halt
		s.rollback, s.halt = false, ""
		if _, err := t.append(s.logRun, "log.rollback_acknowledged", map[string]any{}); err != nil {
			s.rollback, s.halt = true, halt
			return err
		}
		t.b.Meta = map[string]string{metaRollback: "", metaRollback + "_acknowledged_at": strconv.FormatInt(t.now.UnixMilli(), 10)}
		return nil
	})
}

// RollbackDetected reports whether writes are refused because of a
// detected rollback or fork.
func (s *Signer) RollbackDetected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rollback
}

// Halted returns the type of the "_log" record that made the signer
// refuse writes until [Signer.AcknowledgeRollback]: verify.TypeRollbackDetected
// (a witness holds a larger tree) or verify.TypeForkDetected (a witness's
// fork answer); "" while it accepts writes. For readiness and metrics.
func (s *Signer) Halted() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.halt
}

// every runs f every d until the signer stops; one of the background
// goroutines counted in bgWG.
func (s *Signer) every(d time.Duration, f func()) {
	defer s.bgWG.Done()
	tk := time.NewTicker(d)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			f()
		}
	}
}

func (s *Signer) checkpointLoop() {
	s.every(s.opts.CheckpointInterval, func() {
		if _, err := s.Checkpoint(context.Background()); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrLogRollback) && !errors.Is(err, ErrLogConflict) {
			s.log.Warn("periodic checkpoint failed", "err", err)
		}
	})
}

func (s *Signer) idleLoop() {
	s.every(s.opts.IdleCheckInterval, func() {
		if _, err := s.CloseIdle(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			s.log.Warn("idle close failed", "err", err)
		}
	})
}
