package verify_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify"
)

// claimIndex appends a record of run, signed with the log key, whose
// "index" is its leaf position plus delta: a leaf that is in the tree, at
// another index than it claims.
func (l *testLog) claimIndex(run string, delta int64) {
	l.tb.Helper()
	st := l.runs[run]
	pos := l.Size()
	r := &verify.Record{
		Log: l.origin, Index: pos + delta, Run: run, RunSeq: st.seq, Prev: st.prev,
		Type: verify.TypeCallDecided, Time: l.now, Body: map[string]any{"claimed": "off by one"},
	}
	raw, err := verify.SignRecord(r, l.signer)
	if err != nil {
		l.tb.Fatal(err)
	}
	l.appendLeaf(raw)
	st.seq++
	st.prev = verify.ChainHash(raw)
	st.indexes = append(st.indexes, pos)
}

// TestVerifyInclusionShared checks that the verifier, which reuses the
// interior hashes of neighbouring records' audit paths, still refuses every
// bad proof of a long run: each hash of a proof changed in turn (in the
// part shared with the previous record's proof and below it), a hash added
// or cut, a leaf and proofs from another tree, and a record whose leaf is in
// the tree at an index off by one from the index it claims. The existing cases in
// TestVerify cover one changed hash ("bad inclusion proof"), a leaf not in
// the tree ("renumbered and re-signed with the log key") and a smaller tree
// ("older checkpoint not covering the records").
func TestVerifyInclusionShared(t *testing.T) {
	const n = 150 // more than two 64-record worker blocks
	key := newKey(t, origin)
	w := newWitness(t, "w.example")
	trust := newTrust(t, origin, 1, []witness{w}, key)
	// Two logs with the same key that agree on run-x and differ in one
	// record of run-y, so their trees differ.
	build := func(other string) *testLog {
		l := newTestLog(t, origin, key)
		for i := range n {
			if i == n/3 {
				l.add("run-y", verify.TypeCallDecided, map[string]any{"tool": other})
			}
			l.add("run-x", verify.TypeCallDecided, map[string]any{"tool": "Bash", "i": int64(i)})
		}
		return l
	}
	l1, l2 := build("a"), build("b")
	b1 := l1.bundle("run-x", false, l1.checkpoint(w.signer))
	b2 := l2.bundle("run-x", false, l2.checkpoint(w.signer))
	if !slices.EqualFunc(b1.Records, b2.Records, func(a, b verify.BundleRecord) bool { return string(a.Record) == string(b.Record) }) {
		t.Fatal("run-x differs between the two logs")
	}

	type bad struct {
		name     string
		bundle   *verify.Bundle
		position int
		workers  []int
	}
	var cases []bad
	// Records after a first one, at the start of the second worker block,
	// around the run-y leaf and last; the bundle ends at the bad record.
	for _, k := range []int{1, 2, 64, n / 3, n/3 + 1, n - 1} {
		for e := range b1.Records[k].Proof {
			b := clone(b1)
			b.Records = b.Records[:k+1]
			b.Records[k].Proof = slices.Clone(b.Records[k].Proof)
			b.Records[k].Proof[e][7] ^= 0x40
			cases = append(cases, bad{fmt.Sprintf("record %d proof hash %d of %d changed", k, e, len(b1.Records[k].Proof)), b, k, []int{1}})
		}
		p := b1.Records[k].Proof
		for name, proof := range map[string]tlog.RecordProof{
			"its proof in another tree": b2.Records[k].Proof,
			"a hash added to its proof": append(slices.Clone(p), p[len(p)-1]),
			"its proof's last hash cut": p[:len(p)-1],
		} {
			b := clone(b1)
			b.Records = b.Records[:k+1]
			b.Records[k].Proof = proof
			cases = append(cases, bad{fmt.Sprintf("record %d with %s", k, name), b, k, []int{1, 3}})
		}
	}

	// A leaf that is only in the other tree: run-x's next record in l2,
	// with its proof in l2 or with l1's proof for that index.
	l2.add("run-x", verify.TypeCallDecided, map[string]any{"tool": "other tree"})
	l1.add("run-x", verify.TypeCallDecided, map[string]any{"tool": "this tree"})
	cp1 := l1.checkpoint(w.signer)
	b1 = l1.bundle("run-x", false, cp1)
	b2 = l2.bundle("run-x", false, l2.checkpoint(w.signer))
	for _, proof := range []struct {
		name string
		b    *verify.Bundle
	}{{"its own tree's proof", b2}, {"this tree's proof for its index", b1}} {
		b := clone(b1)
		b.Records[n] = verify.BundleRecord{Record: b2.Records[n].Record, Proof: proof.b.Records[n].Proof}
		cases = append(cases, bad{"leaf from another tree with " + proof.name, b, n, []int{1, 3}})
	}

	// Leaves in the tree at an index off by one from the one they claim;
	// a run-y record before each keeps the claimed indexes increasing.
	for _, delta := range []int64{-1, 1} {
		l := build("a")
		l.add("run-y", verify.TypeCallDecided, nil)
		l.claimIndex("run-x", delta)
		l.add("run-y", verify.TypeCallDecided, nil)
		l.add("run-y", verify.TypeCallDecided, nil)
		b := l.bundle("run-x", false, l.checkpoint(w.signer))
		cases = append(cases, bad{fmt.Sprintf("index off by %+d with the proof for the leaf", delta), b, n, []int{1, 3}})
		b = clone(b)
		b.Records[n].Proof = l.proof(l.runs["run-x"].indexes[n]+delta, l.Size())
		cases = append(cases, bad{fmt.Sprintf("index off by %+d with the proof for the claimed index", delta), b, n, []int{1, 3}})
	}

	for _, workers := range []int{1, 3} {
		if res, err := verify.Verify(marshal(t, b1), trust, verify.WithWorkers(workers)); err != nil || res.Records != n+1 {
			t.Fatalf("Verify(genuine bundle, %d workers) = %v, %v", workers, res, err)
		}
	}
	for _, c := range cases {
		for _, workers := range c.workers {
			t.Run(fmt.Sprintf("%s/%d workers", c.name, workers), func(t *testing.T) {
				res, err := verify.Verify(marshal(t, c.bundle), trust, verify.WithWorkers(workers))
				var ve *verify.VerificationError
				if !errors.Is(err, verify.ErrInclusion) || !errors.As(err, &ve) || ve.Position != c.position {
					t.Fatalf("Verify() = %v, %v; want %v at position %d", res, err, verify.ErrInclusion, c.position)
				}
			})
		}
	}
}
