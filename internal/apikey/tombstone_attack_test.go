package apikey

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// hookStore runs before(n) before the n-th lookup (from 1) reads the store
// and after(n) once it has.
type hookStore struct {
	*memStore
	mu            sync.Mutex
	n             int
	before, after func(n int)
}

func (h *hookStore) LookupKey(ctx context.Context, hash [32]byte) (Record, error) {
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	if h.before != nil {
		h.before(n)
	}
	r, err := h.memStore.LookupKey(ctx, hash)
	if h.after != nil {
		h.after(n)
	}
	return r, err
}

// fakeClock is a settable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// TestAttackTombstoneOutlivesRacingRead: a refusal's tombstone must
// outlive every entry a lookup that read the key before the revocation
// can cache. The refusing verification B took its clock reading before
// the racing verification A did (B waited, say for a pool connection,
// before reading the store), so a tombstone that expires CacheTTL after
// B's *start* expires before A's entry would, the sweep drops it, and A's
// late put caches the revoked key: the replica accepts a key it has
// already refused.
func TestAttackTombstoneOutlivesRacingRead(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: t0}
	st := &hookStore{memStore: newMemStore()}
	const ttl = 30 * time.Second
	s, err := New(Options{Store: st, CacheTTL: ttl, Now: clk.Now, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k, _ := s.Mint(ctx, alice, 0)
	other, _ := s.Mint(ctx, alice, 0)
	h := sha256.Sum256([]byte(k.Key))

	readA, releaseA, doneA := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	st.after = func(n int) {
		if n == 2 { // A has read the live key; it stalls before caching it
			close(readA)
			<-releaseA
		}
	}
	st.before = func(n int) {
		if n != 1 {
			return
		}
		// B has its clock reading (t0) and has not read the store yet.
		clk.Set(t0.Add(time.Second))
		go func() { _, err := s.Verify(ctx, k.Key); doneA <- err }()
		<-readA
		st.memStore.RevokeKey(ctx, h, clk.Now()) // another replica; notice lost
	}
	if _, err := s.Verify(ctx, k.Key); !errors.Is(err, ErrRevoked) { // B
		t.Fatalf("Verify() reading the revocation = %v, want ErrRevoked", err)
	}
	if _, err := s.Verify(ctx, k.Key); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Verify() after a refusal = %v, want ErrRevoked", err)
	}
	// Just under CacheTTL after the refusal, another key's verification sweeps.
	clk.Set(t0.Add(ttl + 500*time.Millisecond))
	if _, err := s.Verify(ctx, other.Key); err != nil {
		t.Fatal(err)
	}
	close(releaseA)
	if err := <-doneA; err != nil {
		t.Fatalf("Verify() racing the revocation = %v, want the success it read", err)
	}
	clk.Set(t0.Add(ttl + 600*time.Millisecond))
	if _, err := s.Verify(ctx, k.Key); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Verify() of a key this replica refused = %v, want ErrRevoked (the racing read was cached after the tombstone's sweep)", err)
	}
}

// TestAttackTombstonesBounded: a holder of many revoked keys fills the
// cache with tombstones no further than CacheSize; a refusal with the
// cache full keeps nothing (and every revoked key is still refused), a
// tombstone never refuses another key, and a live key is still accepted
// (read from the store while the cache is full, as with a cache full of
// live keys before tombstones).
func TestAttackTombstonesBounded(t *testing.T) {
	st := &hookStore{memStore: newMemStore()}
	const size = 4
	s, err := New(Options{Store: st, CacheSize: size, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var revoked []string
	for range 3 * size {
		m, _ := s.Mint(ctx, alice, 0)
		st.memStore.RevokeKey(ctx, sha256.Sum256([]byte(m.Key)), time.Now()) // elsewhere
		revoked = append(revoked, m.Key)
	}
	live, _ := s.Mint(ctx, alice, 0)
	for range 2 {
		for _, k := range revoked {
			if _, err := s.Verify(ctx, k); !errors.Is(err, ErrRevoked) {
				t.Fatalf("Verify(revoked) = %v, want ErrRevoked", err)
			}
		}
	}
	s.cache.mu.RLock()
	n := len(s.cache.entries)
	s.cache.mu.RUnlock()
	if n > size {
		t.Errorf("%d cache entries, want at most CacheSize %d", n, size)
	}
	for range 3 {
		if r, err := s.Verify(ctx, live.Key); err != nil || r.Hash != sha256.Sum256([]byte(live.Key)) {
			t.Fatalf("Verify(live) with the cache full of tombstones = %+v, %v", r, err)
		}
	}
}
