package apikey

import (
	"sync"
	"time"
)

// cache holds successful verifications for a short time. Entries expire at
// the earlier of the cache TTL and the key's own expiry.
//
// A verification that read the store before a revocation and stores its
// result after the revocation's eviction would cache a revoked key. So
// every eviction bumps gen, get reports gen on a miss, and put stores
// nothing if any eviction happened since that get.
type cache struct {
	ttl  time.Duration
	size int

	mu      sync.RWMutex
	entries map[[32]byte]cacheEntry
	sweepAt time.Time
	gen     uint64
}

type cacheEntry struct {
	rec   Record
	until time.Time
}

func newCache(ttl time.Duration, size int) *cache {
	return &cache{ttl: ttl, size: size, entries: make(map[[32]byte]cacheEntry)}
}

// get returns the cached record of hash, or on a miss the generation to
// pass to put.
func (c *cache) get(hash [32]byte, now time.Time) (Record, uint64, bool) {
	c.mu.RLock()
	e, ok := c.entries[hash]
	gen := c.gen
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return Record{}, gen, false
	}
	return e.rec, gen, true
}

// put caches r unless an eviction happened after the get that returned
// gen.
func (c *cache) put(r Record, now time.Time, gen uint64) {
	until := now.Add(c.ttl)
	if r.ExpiresAt.Before(until) {
		until = r.ExpiresAt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if now.After(c.sweepAt) {
		for h, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, h)
			}
		}
		c.sweepAt = now.Add(c.ttl)
	}
	if len(c.entries) >= c.size {
		return
	}
	c.entries[r.Hash] = cacheEntry{rec: r, until: until}
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
