package postgres

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// TestAttackRevocationRacesVerifyAndListenerKill: replica 1 verifies a
// key from many goroutines (each eviction sends them back to the store,
// so their lookups race the revocation and their cache puts race the
// eviction) while replica 2 revokes it; in every other round replica 1's
// listener connection is killed just before the revocation (the
// notification is lost; the reconnect's evictAll must cover it). Once
// replica 1 has refused the key, it must never accept it again: a stale
// put would re-cache the revoked key for the cache TTL (1 h here).
func TestAttackRevocationRacesVerifyAndListenerKill(t *testing.T) {
	dbs := openReplicas(t, 2)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	svc1, err := apikey.New(apikey.Options{Store: dbs[0], CacheTTL: time.Hour, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc2, err := apikey.New(apikey.Options{Store: dbs[1], CacheTTL: time.Hour, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	startListener(t, dbs[0], &listener{
		evict: svc1.Evict, evictAll: func() { svc1.EvictAll(); ev.evictAll() },
		pingEvery: 50 * time.Millisecond, minBackoff: 5 * time.Millisecond, maxBackoff: 20 * time.Millisecond,
		listening: ev.listening,
	})
	waitFor(t, "the listener to listen", func() bool { return ev.alls() >= 1 })
	id := apikey.Identity{Tenant: "agents", Agent: "race", Session: "p", Method: "static"}

	for round := range 20 {
		m, err := svc2.Mint(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc1.Verify(ctx, m.Key); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		var refusedThenAccepted atomic.Int64
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				refused := false
				for !stop.Load() {
					_, err := svc1.Verify(ctx, m.Key)
					if errors.Is(err, apikey.ErrRevoked) {
						refused = true
					} else if err == nil && refused {
						refusedThenAccepted.Add(1)
					}
				}
			}()
		}
		if round%2 == 1 {
			pid := ev.lastPID()
			dbs[1].pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(pid))
		}
		if err := svc2.Revoke(ctx, m.Key); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "replica 1 to refuse the revoked key", func() bool {
			_, err := svc1.Verify(ctx, m.Key)
			return errors.Is(err, apikey.ErrRevoked)
		})
		time.Sleep(20 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if n := refusedThenAccepted.Load(); n > 0 {
			t.Fatalf("round %d: replica 1 accepted the key %d times after refusing it", round, n)
		}
		if _, err := svc1.Verify(ctx, m.Key); !errors.Is(err, apikey.ErrRevoked) {
			t.Fatalf("round %d: replica 1 re-cached the revoked key: Verify = %v", round, err)
		}
	}
}
