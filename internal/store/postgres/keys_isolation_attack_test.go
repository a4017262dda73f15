package postgres

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// TestAttackRevokeKeyUnderStrictDefaultIsolation: the store supports a
// server whose transactions default to repeatable read or serializable
// (remembers fall back to explicit read-committed transactions, and
// d.tx pins read committed). Two replicas revoking the same key at once
// (a holder's own revocation and an operator's, say) both succeed, as
// revoking a revoked key does by the apikey.Store contract. RevokeKey
// was one statement in an implicit transaction at the server's default,
// and one of them failed with SQLSTATE 40001, in every exec mode.
func TestAttackRevokeKeyUnderStrictDefaultIsolation(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		for _, mode := range []string{"", "exec"} {
			t.Run(strings.ReplaceAll(level, " ", "_")+"/mode="+mode, func(t *testing.T) {
				db := openMode(t, mode, level, 16)
				ctx := context.Background()
				now := time.Now().Truncate(time.Second)
				for round := range 5 {
					r := apikey.Record{Hash: sha256.Sum256([]byte(t.Name() + string(rune('a'+round)))),
						Identity: apikey.Identity{Tenant: "t", Agent: "a", Session: "s", Method: "static"},
						IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
					if err := db.InsertKey(ctx, r); err != nil {
						t.Fatal(err)
					}
					var wg sync.WaitGroup
					errs := make(chan error, 16)
					for i := range 16 {
						wg.Go(func() {
							if err := db.RevokeKey(ctx, r.Hash, now.Add(time.Duration(i)*time.Second)); err != nil {
								errs <- err
							}
						})
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						t.Fatalf("concurrent RevokeKey of one key = %v", err)
					}
				}
			})
		}
	}
}

// TestStrictDefaultIsolationConcurrentWrites: the other single-statement
// writes that replicas run at the same time on the same rows (pruning
// expired keys, storing a policy snapshot) succeed under a repeatable
// read or serializable default too: they run in d.tx (read committed),
// where the second waits for the first instead of failing with 40001.
func TestStrictDefaultIsolationConcurrentWrites(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			db := openMode(t, "", level, 16)
			ctx := context.Background()
			now := time.Now().Truncate(time.Second)
			concurrently := func(what string, f func() error) {
				t.Helper()
				var wg sync.WaitGroup
				errs := make(chan error, 16)
				for range 16 {
					wg.Go(func() {
						if err := f(); err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("concurrent %s = %v", what, err)
				}
			}
			for round := range 5 {
				for i := range 20 {
					r := apikey.Record{Hash: sha256.Sum256([]byte(t.Name() + string(rune('a'+round)) + string(rune('a'+i)))),
						Identity: apikey.Identity{Tenant: "t", Agent: "a", Session: "s", Method: "static"},
						IssuedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)}
					if err := db.InsertKey(ctx, r); err != nil {
						t.Fatal(err)
					}
				}
				concurrently("DeleteExpiredKeys", func() error {
					_, err := db.DeleteExpiredKeys(ctx, now)
					return err
				})
				hash := t.Name() + string(rune('a'+round))
				concurrently("PutPolicy", func() error { return db.PutPolicy(ctx, hash, []byte(`{}`)) })
			}
		})
	}
}
