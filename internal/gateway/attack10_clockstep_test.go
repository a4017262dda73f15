package gateway

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttack10RevokedAfterClockStep: the wall clock stepped forward past a
// revoked token's exp + leeway (a bad NTP answer, a VM resumed) and then
// back. The poller pruned the revocation from memory at the forward step
// (and, for a step over pruneGrace, the store its rows), the verify and
// minted caches still held the token, so once the clock was back the
// revoked token was served again until its exp. Now a revocation is kept
// in memory as long as the store keeps it, and the minted cache forgets
// the tokens whose revocations are pruned, so the token is refused
// whichever way the store went.
func TestAttack10RevokedAfterClockStep(t *testing.T) {
	for _, step := range []time.Duration{2 * time.Minute, 3 * time.Hour} {
		var offset atomic.Int64
		now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		e := newEnv(t, func(o *Options) { o.Now = now })
		m := e.mint(t, Grant{Providers: []string{"openai"}, TTL: time.Minute})
		if code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 200 {
			t.Fatalf("before revoking = %d %q", code, body)
		}
		if err := e.g.Revoke(t.Context(), m.JTI); err != nil {
			t.Fatal(err)
		}
		offset.Store(int64(step))
		// Let the poller prune at the stepped clock (it prunes once a
		// minute of that clock).
		time.Sleep(200 * time.Millisecond)
		offset.Store(0)
		time.Sleep(100 * time.Millisecond)
		code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}")
		if code != http.StatusUnauthorized {
			t.Errorf("step %v: revoked token after the clock came back = %d %q, want 401", step, code, body)
		}
	}
}

// TestAttack10RevokedAfterClockStepRestart: the same step, with a replica
// (re)started while the clock was ahead: its first poll skipped the
// revocation of the token it took for expired, and once the clock was
// back it served the revoked token (its record still in the store).
func TestAttack10RevokedAfterClockStepRestart(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newEnv(t, func(o *Options) { o.Now = now })
	m := e.mint(t, Grant{Providers: []string{"openai"}, TTL: time.Minute})
	if err := e.g.Revoke(t.Context(), m.JTI); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(2 * time.Minute))
	e2 := newEnv(t, func(o *Options) { o.Now = now; o.Store = e.store; o.SigningKey = e.key })
	offset.Store(0)
	code, _, body := e2.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}")
	if code != http.StatusUnauthorized {
		t.Errorf("revoked token on a replica started while the clock was ahead = %d %q, want 401", code, body)
	}
}
