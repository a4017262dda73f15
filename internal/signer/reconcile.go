package signer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/agentcustody/custody/verify"
)

// maxUnreportedListed bounds the unreported tool uses a run.reconciled
// record lists one by one; unreported_count counts them all.
const maxUnreportedListed = 1000

// reconState is what a run's reconciliation needs, kept with the run and
// rebuilt from the store's argument digests on load.
type reconState struct {
	modelCalls int         // model.call records in the run
	unreadable int         // of them, responses that could not be read for tool uses
	dropped    int         // tool uses beyond the gateway's bound, never listed
	requested  []ArgDigest // tool uses the model requested, in log order
	decided    []ArgDigest // calls decided, in log order
}

// unreported is one requested tool use no decision matched.
type unreported struct {
	index int64
	pos   int
	tool  string
}

// match pairs each requested tool use, in log order, with the first
// decision not yet paired of the same tool and the same argument digest,
// and returns the uses left over. A use whose arguments could not be
// read (malformed, or over the gateway's bound) pairs with nothing: what
// it asked for cannot be shown to have been decided.
func (r *reconState) match() []unreported {
	used := make([]bool, len(r.decided))
	var out []unreported
	for _, u := range r.requested {
		found := false
		for i, d := range r.decided {
			if u.Digest == nil || used[i] || d.Tool != u.Tool || !bytes.Equal(d.Digest, u.Digest) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			out = append(out, unreported{u.Index, u.Pos, u.Tool})
		}
	}
	return out
}

// reconcile appends run.reconciled to a run that recorded model calls,
// before its run.closing; on the committer.
//
//	{model_calls, tool_uses, decided_calls, unreported_count,
//	 unreported: [{index, pos, tool}], unreadable_responses}
//
// tool_uses counts the tool uses listed in the run's model.call records
// plus those dropped beyond the gateway's bound; unreported_count is the
// listed uses no decision matched plus the dropped ones (which cannot be
// matched); unreadable_responses counts the model calls whose response
// could not be read for tool uses (response_malformed), which may hide
// any. A run is reconciled clean only when every use the model requested
// was decided and every response was read.
func (t *txn) reconcile(rs *runState) error {
	r := &rs.recon
	if r.modelCalls == 0 {
		return nil
	}
	left := r.match()
	list := make([]any, 0, min(len(left), maxUnreportedListed))
	for _, u := range left[:min(len(left), maxUnreportedListed)] {
		list = append(list, map[string]any{"index": u.index, "pos": int64(u.pos), "tool": u.tool})
	}
	_, err := t.append(rs, verify.TypeRunReconciled, map[string]any{
		"model_calls":          int64(r.modelCalls),
		"tool_uses":            int64(len(r.requested) + r.dropped),
		"decided_calls":        int64(len(r.decided)),
		"unreported_count":     int64(len(left) + r.dropped),
		"unreported":           list,
		"unreadable_responses": int64(r.unreadable),
	})
	return err
}

// unreadableMark is the Tool of a DigestModelCall row whose response
// could not be read for tool uses.
const unreadableMark = "response_malformed"

// decidedDigest is the argument digest of a decided call.
func decidedDigest(run string, index int64, tool string, canon []byte) ArgDigest {
	d := sha256.Sum256(canon)
	return ArgDigest{Run: run, Index: index, Kind: DigestDecided, Tool: tool, Digest: d[:]}
}

// loadRecon rebuilds rs's reconciliation state from the store.
func (s *Signer) loadRecon(ctx context.Context, rs *runState) error {
	ds, err := s.store.ArgDigests(ctx, rs.row.ID)
	if err != nil {
		return fmt.Errorf("signer: load run %s digests: %w", rs.row.ID, err)
	}
	for _, d := range ds {
		switch d.Kind {
		case DigestDecided:
			rs.recon.decided = append(rs.recon.decided, d)
		case DigestRequested:
			rs.recon.requested = append(rs.recon.requested, d)
		case DigestModelCall:
			rs.recon.modelCalls++
			rs.recon.dropped += d.Pos
			if d.Tool == unreadableMark {
				rs.recon.unreadable++
			}
		}
	}
	return nil
}
