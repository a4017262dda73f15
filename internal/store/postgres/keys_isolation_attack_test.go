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
// d.tx pins read committed). RevokeKey is one statement in an implicit
// transaction at the server's default, so two replicas revoking the same
// key at once (a holder's own revocation and an operator's, say) fail
// one of them with SQLSTATE 40001, though revoking a revoked key is a
// success by the apikey.Store contract. Seen through every exec mode.
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
