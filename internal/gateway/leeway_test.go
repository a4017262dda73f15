package gateway

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestLeewayConfigurable mints on a replica whose clock runs ahead of the
// verifying one (a fresh token is not yet valid there) and checks tokens
// just past exp, under each leeway.
func TestLeewayConfigurable(t *testing.T) {
	key := newKey(t)
	pubs := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	ahead, _ := NewIssuer(TokenConfig{Now: fixedClock(t0.Add(20 * time.Second))}, key, nil)
	fresh, _, err := ahead.Mint(Grant{Providers: []string{"openai"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	onTime, _ := NewIssuer(TokenConfig{Now: fixedClock(t0.Add(-time.Hour))}, key, nil)
	expired, _, err := onTime.Mint(Grant{Providers: []string{"openai"}, TTL: time.Hour - 3*time.Second}) // exp 3 s ago
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		leeway              time.Duration
		wantFresh, wantExpd error
	}{
		{NoLeeway, ErrTokenNotYetValid, ErrTokenExpired},
		{0, ErrTokenNotYetValid, nil}, // the default, 5 s
		{30 * time.Second, nil, nil},
		{MaxLeeway, nil, nil},
	} {
		t.Run(fmt.Sprint(tc.leeway), func(t *testing.T) {
			v, err := NewVerifier(TokenConfig{Leeway: tc.leeway, Now: fixedClock(t0), CacheSize: -1}, pubs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(fresh); !errors.Is(err, tc.wantFresh) && !(err == nil && tc.wantFresh == nil) {
				t.Errorf("Verify(minted 20 s ahead) = %v, want %v", err, tc.wantFresh)
			}
			if _, err := v.Verify(expired); !errors.Is(err, tc.wantExpd) && !(err == nil && tc.wantExpd == nil) {
				t.Errorf("Verify(expired 3 s ago) = %v, want %v", err, tc.wantExpd)
			}
		})
	}
	for _, bad := range []time.Duration{-2 * time.Second, MaxLeeway + time.Second} {
		if _, err := NewVerifier(TokenConfig{Leeway: bad}, pubs, nil); err == nil {
			t.Errorf("NewVerifier(Leeway %v) = nil error", bad)
		}
		if g, err := New(t.Context(), Options{Store: newMemStore(), SigningKey: key, Leeway: bad}); err == nil {
			g.Close()
			t.Errorf("New(Leeway %v) = nil error", bad)
		}
	}
}
