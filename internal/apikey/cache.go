package apikey

import (
	"sync"
	"time"
)

// cache holds successful verifications, and revocations the store
// reported, for a short time. Entries expire at the earlier of the cache
// TTL and the key's own expiry.
//
// A verification that read the store before a revocation and stores its
// result after the revocation's eviction would cache a revoked key. So
// every eviction bumps gen, get reports gen on a miss, and put stores
// nothing if any eviction happened since that get.
//
// A verification that read the store before a revocation and stores its
// result after another verification on this replica saw the revocation
// (with no eviction between them: the notification was lost with the
// listener's connection, and the reconnect's EvictAll has not run yet)
// would cache it too. So a revocation seen in the store is kept as a
// tombstone, which put never replaces: once this replica has refused a
// key, it refuses it until the tombstone expires, and from then on the
// store refuses it (revocation is final).
type cache struct {
	ttl  time.Duration
	size int

	mu      sync.RWMutex
	entries map[[32]byte]cacheEntry
	sweepAt time.Time
	gen     uint64
}

type cacheEntry struct {
	rec     Record
	until   time.Time
	revoked bool // a tombstone: the store reported the key revoked
}

func newCache(ttl time.Duration, size int) *cache {
	return &cache{ttl: ttl, size: size, entries: make(map[[32]byte]cacheEntry)}
}

// get returns the cached entry of hash, or on a miss the generation to
// pass to put.
func (c *cache) get(hash [32]byte, now time.Time) (cacheEntry, uint64, bool) {
	c.mu.RLock()
	e, ok := c.entries[hash]
	gen := c.gen
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return cacheEntry{}, gen, false
	}
	return e, gen, true
}

// put caches r, a live key, unless an eviction happened after the get
// that returned gen or the key has a tombstone.
func (c *cache) put(r Record, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.entries[r.Hash].revoked {
		return
	}
	c.store(cacheEntry{rec: r}, now)
}

// putRevoked keeps a tombstone for r, a key the store reported revoked
// at now. A key already past its expiry gets none: no entry of it can be
// served, live or not (an entry never outlives the key's expiry). When
// the cache is full it drops a live entry (the first of at most
// revokedScan it looks at, in map order; it costs that key a store read)
// to make room. When it finds none it evicts the key instead, which still
// stops every put of a verification begun before, but also those of
// every other key.
func (c *cache) putRevoked(r Record, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !now.Before(r.ExpiresAt) {
		delete(c.entries, r.Hash)
		return
	}
	e := cacheEntry{rec: r, revoked: true}
	if c.store(e, now) {
		return
	}
	seen := 0
	for h, old := range c.entries {
		if !old.revoked {
			delete(c.entries, h)
			c.store(e, now)
			return
		}
		if seen++; seen == revokedScan {
			break
		}
	}
	delete(c.entries, r.Hash)
	c.gen++
}

// revokedScan bounds how many entries putRevoked looks at for a live one
// to drop, under the write lock every verification needs: a cache full
// of tombstones (100,000 by default) must not make each refusal a scan
// of all of them.
const revokedScan = 16

// store sets e's expiry and stores it under e.rec.Hash, first sweeping
// expired entries if a TTL has passed since the last sweep; it reports
// false if the cache is full. c.mu must be held.
func (c *cache) store(e cacheEntry, now time.Time) bool {
	e.until = now.Add(c.ttl)
	if e.rec.ExpiresAt.Before(e.until) {
		e.until = e.rec.ExpiresAt
	}
	if now.After(c.sweepAt) {
		for h, old := range c.entries {
			if !now.Before(old.until) {
				delete(c.entries, h)
			}
		}
		c.sweepAt = now.Add(c.ttl)
	}
	if _, ok := c.entries[e.rec.Hash]; !ok && len(c.entries) >= c.size {
		return false
	}
	c.entries[e.rec.Hash] = e
	return true
}

func (c *cache) evict(hash [32]byte) {
	c.mu.Lock()
	delete(c.entries, hash)
	c.gen++
	c.mu.Unlock()
}

func (c *cache) evictAll() {
	c.mu.Lock()
	clear(c.entries)
	c.gen++
	c.mu.Unlock()
}
