package gateway

import (
	"crypto/ed25519"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentcustody/custody/internal/metering"
)

func (m *memStore) lookupCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookups
}

// TestTokenNotMintedRefused: with the signing key leaked, a token the
// admin plane never minted verifies; the gateway must refuse it when its
// jti is not recorded, when it reuses a recorded jti with other claims,
// and when it claims a longer life than the admin plane mints.
func TestTokenNotMintedRefused(t *testing.T) {
	e := newEnv(t)
	real := e.mint(t, Grant{Providers: []string{"openai"}, TTL: time.Hour, RunID: "r1"})
	budgeted := e.mint(t, Grant{Providers: []string{"openai"}, RunID: "r1", Budget: metering.Usage{Requests: 1}, RunBudget: metering.Usage{OutputTokens: 5}})
	now := time.Now().Truncate(time.Second)
	forge := func(f func(*Claims)) string {
		c := &Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: DefaultIssuer, Audience: jwt.ClaimStrings{DefaultAudience},
				ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), NotBefore: jwt.NewNumericDate(now),
				IssuedAt: jwt.NewNumericDate(now), ID: "forged-jti-0000000000",
			},
			Providers: []string{"openai"},
		}
		f(c)
		return signRaw(t, jwt.SigningMethodEdDSA, e.key, KeyID(e.key.Public().(ed25519.PublicKey)), c)
	}
	for _, tc := range []struct {
		name, token, want string
	}{
		{"unknown jti", forge(func(*Claims) {}), "invalid gateway token: not minted by this gateway\n"},
		{"minted jti, more providers", forge(func(c *Claims) {
			*c = *real.Claims
			c.Providers = []string{"openai", "anthropic"}
		}), "invalid gateway token: not minted by this gateway\n"},
		{"minted jti, longer exp", forge(func(c *Claims) {
			*c = *real.Claims
			c.ExpiresAt = jwt.NewNumericDate(c.ExpiresAt.Add(time.Hour))
		}), "invalid gateway token: not minted by this gateway\n"},
		{"minted jti, budget dropped", forge(func(c *Claims) {
			*c = *budgeted.Claims
			c.Budget = nil
		}), "invalid gateway token: not minted by this gateway\n"},
		{"minted jti, run budget raised", forge(func(c *Claims) {
			*c = *budgeted.Claims
			c.RunBudget = &metering.Usage{OutputTokens: 5000}
		}), "invalid gateway token: not minted by this gateway\n"},
		{"budget added to a token minted without", forge(func(c *Claims) {
			*c = *real.Claims
			c.Budget = &metering.Usage{Requests: 1}
		}), "invalid gateway token: not minted by this gateway\n"},
		{"minted jti, other run", forge(func(c *Claims) {
			*c = *real.Claims
			c.RunID = "r2"
		}), "invalid gateway token: not minted by this gateway\n"},
		{"lifetime over the maximum", forge(func(c *Claims) {
			*c = *real.Claims
			c.ExpiresAt = jwt.NewNumericDate(c.IssuedAt.Add(MaxTokenTTL + time.Second))
		}), "invalid gateway token: lifetime over the maximum\n"},
		{"ten-year token", forge(func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(10 * 365 * 24 * time.Hour)) }),
			"invalid gateway token: lifetime over the maximum\n"},
		{"no iat", forge(func(c *Claims) { c.IssuedAt = nil }), "invalid gateway token: malformed\n"},
		{"iat in the future", forge(func(c *Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(time.Hour)) }),
			"invalid gateway token: not yet valid\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(tc.token), "{}")
			if code != http.StatusUnauthorized || body != tc.want {
				t.Errorf("forged token = %d %q, want 401 %q", code, body, tc.want)
			}
		})
	}
	// The real token still works, and a token at exactly the maximum
	// lifetime verifies.
	if code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(real.Token), "{}"); code != 200 {
		t.Errorf("minted token = %d %q", code, body)
	}
	maxTTL := e.mint(t, Grant{Providers: []string{"openai"}, TTL: MaxTokenTTL})
	if code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(maxTTL.Token), "{}"); code != 200 {
		t.Errorf("minted token with the maximum TTL = %d %q", code, body)
	}
	if strings.Contains(e.logs.String(), real.Token) {
		t.Error("the log holds a token")
	}
}

// TestMintedCheckedOnceFailsClosed: a replica that did not mint a token
// looks its jti up once and then serves it from its cache; while the
// store cannot be asked, an unchecked token is refused (503), never let
// through.
func TestMintedCheckedOnceFailsClosed(t *testing.T) {
	a := newEnv(t)
	b := newEnv(t, func(o *Options) { o.Store = a.store; o.SigningKey = a.key })
	m := a.mint(t, Grant{Providers: []string{"openai"}})

	a.store.setErrs(nil, errors.New("connection refused"))
	code, hdr, body := b.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}")
	if code != http.StatusServiceUnavailable || body != "invalid gateway token: cannot be checked now\n" || hdr.Get("Retry-After") == "" {
		t.Errorf("B with the store down = %d %q Retry-After %q; want 503 invalid gateway token: cannot be checked now", code, body, hdr.Get("Retry-After"))
	}
	if code, _, body := a.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 200 {
		t.Errorf("A, which minted it, with the store down = %d %q; want 200 (remembered at mint)", code, body)
	}
	a.store.setErrs(nil, nil)

	before := a.store.lookupCount()
	for i := range 10 {
		if code, _, body := b.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 200 {
			t.Fatalf("B call %d = %d %q", i, code, body)
		}
	}
	if n := a.store.lookupCount() - before; n != 1 {
		t.Errorf("B looked the jti up %d times for 10 calls, want 1", n)
	}
	a.store.setErrs(nil, errors.New("connection refused"))
	if code, _, body := b.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 200 {
		t.Errorf("B, cached, with the store down = %d %q", code, body)
	}
}

// TestMintedModelsMustMatch: with the signing key leaked, a token that
// reuses a real minted jti with every other claim unchanged must not be
// able to drop, change or add a model allow-list; the models are compared
// as a set (order and repeats do not matter). A record kept before models
// were recorded (Models nil) is refused whatever the token says.
func TestMintedModelsMustMatch(t *testing.T) {
	e := newEnv(t)
	limited := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini", "o3-mini"}, TTL: time.Hour, RunID: "r1"})
	open := e.mint(t, Grant{Providers: []string{"openai"}, TTL: time.Hour, RunID: "r2"})
	// A replica that did not mint the tokens: it must ask the store.
	b := newEnv(t, func(o *Options) { o.Store = e.store; o.SigningKey = e.key })
	forge := func(m Minted, models []string) string {
		c := *m.Claims
		c.Models = models
		return signRaw(t, jwt.SigningMethodEdDSA, e.key, KeyID(e.key.Public().(ed25519.PublicKey)), &c)
	}
	const notMinted = "invalid gateway token: not minted by this gateway\n"
	for _, tc := range []struct {
		name, token string
		code        int
		want        string
	}{
		{"models dropped", forge(limited, nil), http.StatusUnauthorized, notMinted},
		{"models emptied", forge(limited, []string{}), http.StatusUnauthorized, notMinted},
		{"model changed", forge(limited, []string{"gpt-4o-mini", "gpt-4o"}), http.StatusUnauthorized, notMinted},
		{"model added", forge(limited, []string{"gpt-4o-mini", "o3-mini", "gpt-4o"}), http.StatusUnauthorized, notMinted},
		{"model removed", forge(limited, []string{"gpt-4o-mini"}), http.StatusUnauthorized, notMinted},
		{"models added to an open token", forge(open, []string{"gpt-4o-mini"}), http.StatusUnauthorized, notMinted},
		{"same models reordered", forge(limited, []string{"o3-mini", "gpt-4o-mini", "o3-mini"}), http.StatusOK, ""},
		{"real limited token", limited.Token, http.StatusOK, ""},
		{"real open token", open.Token, http.StatusOK, ""},
	} {
		for _, g := range []struct {
			name string
			e    *env
		}{{"minting replica", e}, {"other replica", b}} {
			t.Run(tc.name+"/"+g.name, func(t *testing.T) {
				code, _, body := g.e.do(t, "POST", "/openai/v1/chat/completions", bearer(tc.token), `{"model":"gpt-4o-mini"}`)
				if code != tc.code || (tc.want != "" && body != tc.want) {
					t.Errorf("token = %d %q, want %d %q", code, body, tc.code, tc.want)
				}
			})
		}
	}

	// A record from before models were kept: no models claim is proof of
	// nothing, so the token is refused (fail closed) until it is re-minted.
	legacy := e.mint(t, Grant{Providers: []string{"openai"}, TTL: time.Hour, RunID: "r3"})
	e.store.mu.Lock()
	rec := e.store.tokens[legacy.JTI]
	rec.Models = nil
	e.store.tokens[legacy.JTI] = rec
	e.store.mu.Unlock()
	if code, _, body := b.do(t, "POST", "/openai/v1/chat/completions", bearer(legacy.Token), "{}"); code != http.StatusUnauthorized || body != notMinted {
		t.Errorf("token recorded without models = %d %q, want 401 %q", code, body, notMinted)
	}
}
