package apikey

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowStore delays every lookup a random while after reading, so that a
// verification that read a key live often stores its result after a
// revocation and another verification's refusal.
type slowStore struct {
	*memStore
	max time.Duration
}

func (s *slowStore) LookupKey(ctx context.Context, h [32]byte) (Record, error) {
	r, err := s.memStore.LookupKey(ctx, h)
	if s.max > 0 {
		time.Sleep(time.Duration(rand.Int64N(int64(s.max))))
	}
	return r, err
}

// TestAttackRefusedNeverAcceptedStress: with a tiny cache kept full of
// live keys and tombstones, keys revoked "elsewhere" (no eviction: the
// notification was lost), random Evict/EvictAll, a short CacheTTL (so
// tombstones expire and the sweep runs) and slow lookups, a verification
// that begins after another verification of the same key was refused
// must never accept it.
func TestAttackRefusedNeverAcceptedStress(t *testing.T) {
	for _, size := range []int{1, 2, 3, 8} {
		t.Run(fmt.Sprintf("CacheSize=%d", size), func(t *testing.T) {
			st := &slowStore{memStore: newMemStore(), max: 300 * time.Microsecond}
			s, err := New(Options{Store: st, CacheSize: size, CacheTTL: 3 * time.Millisecond,
				Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const nkeys = 24
			keys := make([]string, nkeys)
			hashes := make([][32]byte, nkeys)
			for i := range keys {
				m, err := s.Mint(ctx, alice, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				keys[i], hashes[i] = m.Key, sha256.Sum256([]byte(m.Key))
			}
			var refused [nkeys]atomic.Bool
			var violations atomic.Int64
			var firstViolation atomic.Value
			deadline := time.Now().Add(700 * time.Millisecond)
			var wg sync.WaitGroup
			// Revoker: revokes the keys one by one, mostly without eviction.
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < nkeys/2 && time.Now().Before(deadline); i++ {
					time.Sleep(40 * time.Millisecond)
					st.memStore.RevokeKey(ctx, hashes[i], time.Now())
					switch rand.IntN(4) {
					case 0:
						s.Evict(hashes[i])
					case 1:
						s.EvictAll()
					}
				}
			}()
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(deadline) {
						i := rand.IntN(nkeys)
						was := refused[i].Load()
						_, err := s.Verify(ctx, keys[i])
						switch {
						case err == nil && was:
							if violations.Add(1) == 1 {
								firstViolation.Store(fmt.Sprintf("key %d accepted after a refusal", i))
							}
						case errors.Is(err, ErrRevoked):
							refused[i].Store(true)
						case err != nil:
							t.Errorf("Verify = %v", err)
							return
						}
						if rand.IntN(50) == 0 {
							s.EvictAll()
						}
					}
				}()
			}
			wg.Wait()
			if n := violations.Load(); n > 0 {
				t.Fatalf("%d verifications accepted a key this replica had already refused; first: %v", n, firstViolation.Load())
			}
			// Every revoked key is refused now, whatever the cache holds.
			for i := range nkeys / 2 {
				if refused[i].Load() {
					if _, err := s.Verify(ctx, keys[i]); !errors.Is(err, ErrRevoked) {
						t.Errorf("Verify(revoked key %d) = %v, want ErrRevoked", i, err)
					}
				}
			}
			s.cache.mu.RLock()
			n := len(s.cache.entries)
			s.cache.mu.RUnlock()
			if n > size {
				t.Errorf("%d cache entries, want at most %d", n, size)
			}
		})
	}
}
