package signer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
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
	// keys identifies the requested uses of model.call records that
	// name their response (DigestUseKey rows), by position.
	keys map[usePos]useKey
}

// usePos is a tool use's place: its model.call record's leaf index and
// its position in the record's tool_uses.
type usePos struct {
	index int64
	pos   int
}

// useKey identifies a tool use across the model calls that carry the
// same response: useKeyOf its provider, response id, use id and tool.
// retrieve says the use's model call retrieved the response (method
// GET) rather than creating it.
type useKey struct {
	key      [32]byte
	retrieve bool
}

func (r *reconState) setKey(p usePos, k useKey) {
	if r.keys == nil {
		r.keys = make(map[usePos]useKey)
	}
	r.keys[p] = k
}

// Marks (the Tool) of DigestUseKey rows.
const (
	createMark   = "create"
	retrieveMark = "retrieve"
)

// useKeyOf is the SHA-256 of a domain separator, provider, responseID,
// useID and tool, each prefixed by its length as a uvarint: equal for
// two uses only when they are the same use (the provider's use id) of
// the same response (the provider's response id).
func useKeyOf(provider, responseID, useID, tool string) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{"custody tool use key v1", provider, responseID, useID, tool} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	return h.Sum(nil)
}

// repeats returns the requested uses that repeat another, each mapped
// to the use it repeats. A retrieve of a response (GET
// /v1/responses/{id}, streamed, resumed or not) carries again the uses
// its creating call carried, and the agent runs such a use once. Among
// the uses with one key (the same provider, response, use id and tool;
// a use without a response id or use id has none):
//
//   - of those whose arguments were read, with the same digest, each a
//     creating call carried counts, and a retrieve's counts only if no
//     creating call's and no earlier retrieve's does (max(creating
//     calls, 1) in all), whatever the order they were recorded in;
//   - one whose arguments could not be read (a stream cut in them, then
//     resumed) repeats the first read one (a creating call's if any),
//     if there is one: the provider's ids name one use, whose arguments
//     are those read; else each counts (unmatched, unreported).
//
// So a retrieve never cancels a use a creating call carried, a use only
// retrieves carry counts once, two creating calls naming one response
// (which a provider does not write) both count, and uses of one key with
// different arguments all count.
func (r *reconState) repeats() map[usePos]usePos {
	if len(r.keys) == 0 {
		return nil
	}
	type sameArgs struct {
		create    *usePos
		retrieves []usePos
	}
	type group struct {
		byArgs     map[string]*sameArgs
		order      []string // digests in the order first met
		unreadable []usePos
	}
	groups := map[[32]byte]*group{}
	for _, u := range r.requested {
		p := usePos{u.Index, u.Pos}
		k, ok := r.keys[p]
		if !ok {
			continue
		}
		g := groups[k.key]
		if g == nil {
			g = &group{byArgs: map[string]*sameArgs{}}
			groups[k.key] = g
		}
		if u.Digest == nil {
			g.unreadable = append(g.unreadable, p)
			continue
		}
		a := g.byArgs[string(u.Digest)]
		if a == nil {
			a = &sameArgs{}
			g.byArgs[string(u.Digest)] = a
			g.order = append(g.order, string(u.Digest))
		}
		switch {
		case k.retrieve:
			a.retrieves = append(a.retrieves, p)
		case a.create == nil:
			a.create = &p
		}
	}
	out := map[usePos]usePos{}
	for _, g := range groups {
		var read *usePos // the first read use that counts, a creating call's if any
		for _, d := range g.order {
			a := g.byArgs[d]
			of, rs := a.create, a.retrieves
			if of == nil {
				of, rs = &rs[0], rs[1:]
			}
			for _, p := range rs {
				out[p] = *of
			}
			if read == nil || (a.create != nil && r.keys[*read].retrieve) {
				read = of
			}
		}
		if read != nil {
			for _, p := range g.unreadable {
				out[p] = *read
			}
		}
	}
	return out
}

// unreported is one requested tool use no decision matched; repeated
// one that repeats another (of), not matched.
type unreported struct {
	index int64
	pos   int
	tool  string
	of    usePos
}

// match pairs each requested tool use, in log order, with the first
// decision not yet paired of the same tool and the same argument digest,
// and returns the uses left over, and the uses that repeat another
// ([reconState.repeats]), which pair with nothing and are not left over.
// A use whose arguments could not be read (malformed, or over the
// gateway's bound) pairs with nothing: what it asked for cannot be shown
// to have been decided.
func (r *reconState) match() (left, repeated []unreported) {
	used := make([]bool, len(r.decided))
	reps := r.repeats()
	var out []unreported
	for _, u := range r.requested {
		if of, ok := reps[usePos{u.Index, u.Pos}]; ok {
			repeated = append(repeated, unreported{u.Index, u.Pos, u.Tool, of})
			continue
		}
		found := false
		for i, d := range r.decided {
			if u.Digest == nil || used[i] || d.Tool != u.Tool || !bytes.Equal(d.Digest, u.Digest) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			out = append(out, unreported{index: u.Index, pos: u.Pos, tool: u.Tool})
		}
	}
	return out, repeated
}

// reconcile appends run.reconciled to a run that recorded model calls,
// before its run.closing; on the committer.
//
//	{model_calls, tool_uses, decided_calls, unreported_count,
//	 unreported: [{index, pos, tool}], unreadable_responses,
//	 repeated_count?, repeated?: [{index, pos, tool, of_index, of_pos}]}
//
// tool_uses counts the tool uses listed in the run's model.call records
// plus those dropped beyond the gateway's bound; unreported_count is the
// listed uses no decision matched plus the dropped ones (which cannot be
// matched), not counting the repeated ones: uses a retrieve of a
// response carried again (repeated_count of them, present when not 0,
// each listed with the use it repeats, of_index and of_pos, up to
// maxUnreportedListed; see [reconState.repeats]); unreadable_responses counts the model calls whose response
// could not be read for tool uses (response_malformed), which may hide
// any. A run is reconciled clean only when every use the model requested
// was decided and every response was read.
func (t *txn) reconcile(rs *runState) error {
	r := &rs.recon
	if r.modelCalls == 0 {
		return nil
	}
	left, repeated := r.match()
	list := make([]any, 0, min(len(left), maxUnreportedListed))
	for _, u := range left[:min(len(left), maxUnreportedListed)] {
		list = append(list, map[string]any{"index": u.index, "pos": int64(u.pos), "tool": u.tool})
	}
	body := map[string]any{
		"model_calls":          int64(r.modelCalls),
		"tool_uses":            int64(len(r.requested) + r.dropped),
		"decided_calls":        int64(len(r.decided)),
		"unreported_count":     int64(len(left) + r.dropped),
		"unreported":           list,
		"unreadable_responses": int64(r.unreadable),
	}
	if len(repeated) > 0 {
		reps := make([]any, 0, min(len(repeated), maxUnreportedListed))
		for _, u := range repeated[:min(len(repeated), maxUnreportedListed)] {
			reps = append(reps, map[string]any{"index": u.index, "pos": int64(u.pos), "tool": u.tool,
				"of_index": u.of.index, "of_pos": int64(u.of.pos)})
		}
		body["repeated_count"], body["repeated"] = int64(len(repeated)), reps
	}
	_, err := t.append(rs, verify.TypeRunReconciled, body)
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
		case DigestUseKey:
			if len(d.Digest) == 32 {
				var k useKey
				copy(k.key[:], d.Digest)
				k.retrieve = d.Tool == retrieveMark
				rs.recon.setKey(usePos{d.Index, d.Pos}, k)
			}
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
