package signer

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify"
)

// Export writes a run as a bundle (verify.Bundle): every record of the run
// in run_seq order with its RFC 6962 inclusion proof against the latest
// checkpoint (signed now if the latest does not cover the run's last
// record), the key.retired records of "_log" the checkpoint covers (K
// lines, with their proofs), that checkpoint with its cosignatures, every
// log key (informational), the policy snapshots the records reference by
// hash, and whether the run is closed.
func (s *Signer) Export(ctx context.Context, run string) ([]byte, error) {
	if run == verify.LogRun {
		return nil, fmt.Errorf("export %s: %w", run, ErrNotFound)
	}
	leaves, err := s.store.RunLeaves(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", run, err)
	}
	if len(leaves) == 0 {
		return nil, fmt.Errorf("export %s: %w", run, ErrNotFound)
	}
	last := leaves[len(leaves)-1]
	cp, err := s.store.LatestCheckpoint(ctx)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("export %s: %w", run, err)
	}
	if err != nil || cp.Size <= last.Index {
		if cp, err = s.Checkpoint(ctx); err != nil && !errors.Is(err, ErrLogRollback) {
			return nil, fmt.Errorf("export %s: %w", run, err)
		}
		if cp.Size <= last.Index {
			return nil, fmt.Errorf("export %s: no checkpoint covers index %d", run, last.Index)
		}
	}
	b := &verify.Bundle{
		Header: verify.BundleHeader{
			Run:    run,
			Closed: last.Type == verify.TypeRunClosing,
		},
		Checkpoint: cp.Note,
	}
	s.mu.Lock()
	for _, k := range s.committedChain() {
		b.Header.Keys = append(b.Header.Keys, verify.BundleKey{KeyID: k.id, PublicKey: base64.StdEncoding.EncodeToString(k.pub)})
	}
	keyRecs := append([]Leaf(nil), s.keyRecs[:s.committedKeys-1]...)
	s.mu.Unlock()
	hr := s.storeReader(ctx)
	for _, l := range keyRecs {
		if l.Index >= cp.Size {
			break
		}
		p, err := tlog.ProveRecord(cp.Size, l.Index, hr)
		if err != nil {
			return nil, fmt.Errorf("export %s: inclusion proof of key record %d: %w", run, l.Index, err)
		}
		b.KeyRecords = append(b.KeyRecords, verify.BundleRecord{Record: l.Record, Proof: p})
	}
	seen := map[string]bool{}
	for _, l := range leaves {
		p, err := tlog.ProveRecord(cp.Size, l.Index, hr)
		if err != nil {
			return nil, fmt.Errorf("export %s: inclusion proof of %d: %w", run, l.Index, err)
		}
		b.Records = append(b.Records, verify.BundleRecord{Record: l.Record, Proof: p})
		rec, err := verify.ParseRecord(l.Record)
		if err != nil {
			return nil, fmt.Errorf("export %s: stored record %d: %w", run, l.Index, err)
		}
		if h, ok := rec.Body["policy_hash"].(string); ok && !seen[h] {
			seen[h] = true
			snap, err := s.store.Policy(ctx, h)
			if err != nil {
				return nil, fmt.Errorf("export %s: policy %s: %w", run, h, err)
			}
			b.Header.Policies = append(b.Header.Policies, verify.PolicySnapshot{Hash: h, Snapshot: snap})
		}
	}
	out, err := b.Marshal()
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", run, err)
	}
	return out, nil
}
