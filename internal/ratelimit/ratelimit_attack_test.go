package ratelimit

import (
	"math"
	"testing"
	"time"
)

// TestAttackNaNRateFailsOpen: a NaN rate (pflag's Float64 parses "NaN",
// and ServeConfig.Validate only refuses values < 0) is neither "off"
// (rate <= 0 is false for NaN) nor a limit: x/time/rate computes NaN
// tokens, NaN < 0 is false, so every call is allowed — the limiter is
// silently disabled while still storing a bucket per key.
func TestAttackNaNRateFailsOpen(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	k := New(math.NaN(), 20, 0, c.now)
	for i := range 1000 {
		if ok, _ := k.Allow("pod-a"); !ok {
			return // refused at some point: a limit is in force
		}
		_ = i
	}
	t.Fatalf("NaN rate: 1000 calls of one key in the same instant all allowed (burst 20): the limit fails open")
}

// TestAttackTinyRateIdleOverflow: for a tiny positive rate, idle =
// burst/perSecond seconds overflows time.Duration; the float->int64
// conversion is implementation-defined and on amd64 yields MinInt64, a
// negative idle. sweep then forgets every bucket, busy or not, whenever
// the table is full: a key that spent its burst gets a fresh one.
func TestAttackTinyRateIdleOverflow(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	k := New(1e-12, 2, 2, c.now) // two per ~31700 years, two keys at most
	if k.idle <= 0 {
		t.Logf("idle = %v (negative: overflow)", k.idle)
	}
	k.Allow("a")
	k.Allow("a")
	if ok, _ := k.Allow("a"); ok {
		t.Fatal("burst of 2 not enforced")
	}
	k.Allow("b")
	if ok, _ := k.Allow("c"); ok {
		// the table was full of busy buckets; c should have been refused
		if ok, _ := k.Allow("a"); ok {
			t.Fatalf("idle %v: a third key was admitted into a full table of busy buckets by forgetting them all, and key a (burst spent) got a fresh burst", k.idle)
		}
		t.Fatalf("idle %v: a third key was admitted into a full table of busy buckets", k.idle)
	}
}

// TestAttackFullTableSweepCost: with the table full of busy buckets, every
// call with a new key runs a full sweep under the one mutex (O(maxKeys))
// and is refused; a flood of distinct keys (e.g. IPv6 source addresses
// against the per-address limiter, before any token is checked) then
// holds the lock almost continuously and delays every caller, including
// those whose key is already in the table.
