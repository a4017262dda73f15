package gateway_test

import (
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
)

// A minter holds the private key; a verifier needs only public keys,
// selected by the kid in the token header.
func ExampleVerifier() {
	seed := make([]byte, ed25519.SeedSize) // use LoadOrCreateSigningKey in production
	key := ed25519.NewKeyFromSeed(seed)
	clock := func() time.Time { return time.Date(2027, 1, 15, 10, 0, 0, 0, time.UTC) }

	iss, _ := gateway.NewIssuer(gateway.TokenConfig{Now: clock}, key, nil)
	token, claims, _ := iss.Mint(gateway.Grant{Providers: []string{"anthropic"}, TTL: 30 * time.Minute, RunID: "r1"})

	v, _ := gateway.NewVerifier(gateway.TokenConfig{Now: clock}, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, nil)
	got, err := v.Verify(token)
	fmt.Println(err, got.ID == claims.ID, got.Providers, got.RunID, got.ExpiresAt.UTC().Format(time.RFC3339))

	_, err = v.Verify(token[:len(token)-4] + "AAAA")
	fmt.Println(err)
	// Output:
	// <nil> true [anthropic] r1 2027-01-15T10:30:00Z
	// invalid gateway token: bad signature
}
