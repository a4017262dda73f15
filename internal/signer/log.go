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
