package apikey

import (
	"sync"
	"time"
)

// cache holds successful verifications for a short time. Entries expire at
// the earlier of the cache TTL and the key's own expiry.
type cache struct {
	ttl  time.Duration
	size int

	mu      sync.RWMutex
	entries map[[32]byte]cacheEntry
	sweepAt time.Time
}

type cacheEntry struct {
	rec   Record
	until time.Time
}

func newCache(ttl time.Duration, size int) *cache {
	return &cache{ttl: ttl, size: size, entries: make(map[[32]byte]cacheEntry)}
}

func (c *cache) get(hash [32]byte, now time.Time) (Record, bool) {
	c.mu.RLock()
	e, ok := c.entries[hash]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return Record{}, false
	}
	return e.rec, true
}

func (c *cache) put(r Record, now time.Time) {
	until := now.Add(c.ttl)
	if r.ExpiresAt.Before(until) {
		until = r.ExpiresAt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
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
	c.mu.Unlock()
}
