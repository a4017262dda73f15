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

// A declared HTTP API's credential goes in a header after a prefix, or
// in HTTP Basic auth.
func ExampleParseProviderAuth() {
	for _, s := range []string{"header:Authorization:Bearer", "header:X-API-Key", "basic:api", "header:Host"} {
		a, err := gateway.ParseProviderAuth(s)
		fmt.Printf("%q %q %q %v\n", a.Header, a.Prefix, a.BasicUser, err)
	}
	// Output:
	// "Authorization" "Bearer " "" <nil>
	// "X-API-Key" "" "" <nil>
	// "" "" "api" <nil>
	// "" "" "" auth: header Host cannot carry a credential
}

// A token's repos: write implies read; names are OWNER/NAME.
func ExampleCheckRepoGrants() {
	fmt.Println(gateway.CheckRepoGrants([]gateway.RepoGrant{{Repo: "octo/hello", Access: gateway.AccessRead}, {Repo: "octo/site", Access: gateway.AccessWrite}}))
	fmt.Println(gateway.CheckRepoGrants([]gateway.RepoGrant{{Repo: "octo/hello", Access: "admin"}}))
	fmt.Println(gateway.CheckRepoGrants([]gateway.RepoGrant{{Repo: "hello", Access: gateway.AccessRead}}))
	// Output:
	// <nil>
	// repo octo/hello: access must be "read" or "write"
	// repo "hello": want OWNER/NAME as GitHub names repositories
}
