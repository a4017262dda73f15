package apikey

import (
	"testing"
	"time"
)

// TestAttackRefusalWithCacheFullOfTombstonesIsCheap: once a mass
// revocation (or a holder of many revoked keys) has filled the cache with
// tombstones, a refusal that finds no room must not cost more than a
// put that finds no room: putRevoked looks at no more than revokedScan
// entries for a live one to drop, under the cache's write lock that every
// Verify needs (ranging over the whole map took about 10 ms at the
// default CacheSize of 100000). Both costs are measured in the same run;
// the bound is 50 times the put's plus 20 µs.
func TestAttackRefusalWithCacheFullOfTombstonesIsCheap(t *testing.T) {
	const size = 100000 // Options.CacheSize's default
	c := newCache(30*time.Second, size)
	now := time.Now()
	exp := now.Add(time.Hour)
	hash := func(i, tag int) [32]byte {
		var h [32]byte
		h[0], h[1], h[2], h[31] = byte(i), byte(i>>8), byte(i>>16), byte(tag)
		return h
	}
	for i := range size {
		c.putRevoked(Record{Hash: hash(i, 0), ExpiresAt: exp}, now)
	}
	if n := len(c.entries); n != size {
		t.Fatalf("%d entries, want %d", n, size)
	}
	const rounds = 100
	start := time.Now()
	for i := range rounds { // a live key that finds the cache full
		c.put(Record{Hash: hash(i, 1), ExpiresAt: exp}, now, c.gen)
	}
	putCost := time.Since(start) / rounds
	start = time.Now()
	for i := range rounds { // a revoked key that finds it full of tombstones
		c.putRevoked(Record{Hash: hash(i, 2), ExpiresAt: exp}, now)
	}
	revokedCost := time.Since(start) / rounds
	if revokedCost > 50*putCost+20*time.Microsecond {
		t.Errorf("putRevoked with the cache full of %d tombstones takes %v under the write lock, a put that finds it full %v: the refusal scans every entry for a live one", size, revokedCost, putCost)
	}
}
