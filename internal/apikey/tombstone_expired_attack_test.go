package apikey

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"
)

// TestAttackExpiredRevokedKeyKeepsLiveEntry: a key both revoked and past
// its expiry (the store keeps it until pruning, a grace after expiry)
// gets no tombstone: one would be dead already (its expiry caps it),
// answering no later verification and stopping no put (no entry of an
// expired key is served). With the cache full, storing one dropped a live
// entry for nothing, so a holder of expired revoked keys could empty the
// cache of live keys, each of which then cost a store read.
func TestAttackExpiredRevokedKeyKeepsLiveEntry(t *testing.T) {
	s, st, clk := newService(t, Options{CacheSize: 1})
	ctx := context.Background()
	old, _ := s.Mint(ctx, alice, time.Minute)
	st.RevokeKey(ctx, sha256.Sum256([]byte(old.Key)), clk.Now())
	clk.Add(2 * time.Minute) // old has expired, not yet pruned
	live, _ := s.Mint(ctx, alice, time.Hour)
	if _, err := s.Verify(ctx, live.Key); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Verify(ctx, old.Key); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("Verify(expired, revoked) = %v", err)
		}
	}
	n := st.lookups
	if _, err := s.Verify(ctx, live.Key); err != nil {
		t.Fatal(err)
	}
	if st.lookups != n {
		t.Errorf("the live key's entry was dropped to make room for an already-expired tombstone (Verify(live) read the store again)")
	}
}
