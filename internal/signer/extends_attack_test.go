package signer_test

import (
	"errors"
	"math"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/verify"
)

// TestAttackExtendsDigests: Batch.Extends refuses every digest that is
// not of a leaf of the batch in the digest's run, including indexes that
// overflow the subtraction from the log's size, and accepts those that
// are (the log run's own leaves included).
func TestAttackExtendsDigests(t *testing.T) {
	const size = 10
	leaves := []signer.Leaf{
		{Index: size, Run: "r1", RunSeq: 0},
		{Index: size + 1, Run: verify.LogRun, RunSeq: 4},
		{Index: size + 2, Run: "r2", RunSeq: 3},
	}
	heads := map[string]int64{verify.LogRun: 3, "r2": 2}
	for _, c := range []struct {
		name string
		d    signer.ArgDigest
		ok   bool
	}{
		{"own leaf", signer.ArgDigest{Run: "r1", Index: size}, true},
		{"log run's own leaf", signer.ArgDigest{Run: verify.LogRun, Index: size + 1}, true},
		{"other run's leaf in the batch", signer.ArgDigest{Run: "r1", Index: size + 2}, false},
		{"log run's leaf claimed by a run", signer.ArgDigest{Run: "r2", Index: size + 1}, false},
		{"run's leaf claimed as the log run's", signer.ArgDigest{Run: verify.LogRun, Index: size}, false},
		{"stored leaf", signer.ArgDigest{Run: "r1", Index: size - 1}, false},
		{"past the batch", signer.ArgDigest{Run: "r2", Index: size + 3}, false},
		{"min int64", signer.ArgDigest{Run: "r1", Index: math.MinInt64}, false},
		{"max int64", signer.ArgDigest{Run: "r1", Index: math.MaxInt64}, false},
		{"empty run", signer.ArgDigest{Run: "", Index: size}, false},
	} {
		b := signer.Batch{Leaves: leaves, Digests: []signer.ArgDigest{{Run: "r2", Index: size + 2}, c.d}}
		err := b.Extends(size, heads)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, signer.ErrLogConflict)) {
			t.Errorf("%s: Extends = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if err := (&signer.Batch{}).Extends(0, nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
	if err := (&signer.Batch{Digests: []signer.ArgDigest{{Run: "r1", Index: 0}}}).Extends(0, nil); !errors.Is(err, signer.ErrLogConflict) {
		t.Errorf("leafless batch with a digest: %v", err)
	}
}
