// Package ratelimit bounds how often one caller (a pod, a source address)
// may do something: a token bucket per key (golang.org/x/time/rate), kept
// for keys seen recently, in a map of bounded size.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed is a set of token buckets, one per key, each refilling at Rate
// per second up to Burst. The zero value is not usable; see [New].
// Safe for concurrent use.
type Keyed struct {
	rate     rate.Limit
	disabled bool
	burst    int
	max      int
	idle     time.Duration
	now      func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	// noSweepUntil: a sweep before this time frees nothing (the oldest
	// bucket left by the last sweep is not idle long enough yet), so a
	// flood of new keys into a full table costs no repeated full sweeps.
	noSweepUntil time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// New returns buckets of perSecond tokens a second, burst deep, for at
// most maxKeys keys at once (default 100000). A bucket idle long enough
// to have refilled is forgotten when room is needed; if every bucket is
// busy, a new key is refused (a flood of distinct keys is itself
// limited). perSecond <= 0 disables the limit (Allow always true); a NaN
// rate allows the burst and then nothing (it fails closed).
func New(perSecond float64, burst, maxKeys int, now func() time.Time) *Keyed {
	if maxKeys <= 0 {
		maxKeys = 100000
	}
	if now == nil {
		now = time.Now
	}
	if burst < 1 {
		burst = 1
	}
	disabled := perSecond <= 0
	if math.IsNaN(perSecond) { // not a rate: limited to the burst, never open
		perSecond = 0
	}
	idle := time.Hour
	if perSecond > 0 {
		secs := float64(burst) / perSecond
		idle = time.Duration(math.MaxInt64)
		if secs < float64(math.MaxInt64)/float64(time.Second) {
			idle = time.Duration(secs * float64(time.Second))
		}
	}
	return &Keyed{rate: rate.Limit(perSecond), disabled: disabled, burst: burst, max: maxKeys, idle: idle, now: now, buckets: map[string]*bucket{}}
}

// Allow takes a token from key's bucket. If there is none it returns
// false and how long until one is due.
func (k *Keyed) Allow(key string) (bool, time.Duration) {
	if k.disabled {
		return true, 0
	}
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		if len(k.buckets) >= k.max && !k.sweep(now) {
			return false, k.idle
		}
		b = &bucket{lim: rate.NewLimiter(k.rate, k.burst)}
		k.buckets[key] = b
	}
	b.last = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep forgets buckets idle long enough to be full again (forgetting
// them changes nothing) and reports whether there is room.
func (k *Keyed) sweep(now time.Time) bool {
	if now.Before(k.noSweepUntil) {
		return false
	}
	oldest := now
	for key, b := range k.buckets {
		if now.Sub(b.last) >= k.idle {
			delete(k.buckets, key)
		} else if b.last.Before(oldest) {
			oldest = b.last
		}
	}
	k.noSweepUntil = oldest.Add(k.idle)
	return len(k.buckets) < k.max
}
