package gateway

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var t0 = time.Unix(1_800_000_000, 0).UTC()

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signRaw signs claims with method and key, with header kid if not "".
func signRaw(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func goodClaims() *Claims {
	return &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: DefaultIssuer, Audience: jwt.ClaimStrings{DefaultAudience},
			ExpiresAt: jwt.NewNumericDate(t0.Add(time.Hour)), NotBefore: jwt.NewNumericDate(t0),
			IssuedAt: jwt.NewNumericDate(t0), ID: "jti-1",
		},
		Providers: []string{"anthropic"},
	}
}

func TestVerify(t *testing.T) {
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	kid := KeyID(pub)
	other := newKey(t)
	secret := []byte(strings.Repeat("s", 32))
	v, err := NewVerifier(TokenConfig{Now: fixedClock(t0.Add(time.Minute)), CacheSize: -1}, []ed25519.PublicKey{pub}, nil)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*Claims)) *Claims { c := goodClaims(); f(c); return c }
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	good := signRaw(t, jwt.SigningMethodEdDSA, key, kid, goodClaims())
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"custody","aud":["custody-gateway"],"exp":1800003600,"jti":"x","providers":["openai"]}`)) + "." + parts[2]
	noneTok := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."

	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"good", good, nil},
		{"within leeway after exp", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) {
			c.ExpiresAt = jwt.NewNumericDate(t0.Add(time.Minute - 3*time.Second))
		})), nil},
		{"expired", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) {
			c.ExpiresAt = jwt.NewNumericDate(t0.Add(time.Minute - 6*time.Second))
		})), ErrTokenExpired},
		{"not yet valid", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) {
			c.NotBefore = jwt.NewNumericDate(t0.Add(2 * time.Minute))
		})), ErrTokenNotYetValid},
		{"wrong issuer", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) { c.Issuer = "someone" })), ErrTokenIssuer},
		{"no issuer", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) { c.Issuer = "" })), ErrTokenIssuer},
		{"wrong audience", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) { c.Audience = jwt.ClaimStrings{"other"} })), ErrTokenAudience},
		{"no audience", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) { c.Audience = nil })), ErrTokenAudience},
		{"no exp", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) { c.ExpiresAt = nil })), ErrTokenMalformed},
		{"no jti", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) { c.ID = "" })), ErrTokenMalformed},
		{"no providers", signRaw(t, jwt.SigningMethodEdDSA, key, kid, with(func(c *Claims) { c.Providers = nil })), ErrTokenMalformed},
		{"alg none", noneTok, ErrTokenAlgorithm},
		{"alg none signed by jwt", signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", goodClaims()), ErrTokenAlgorithm},
		{"HS256 when Ed25519 expected (public key as secret)", signRaw(t, jwt.SigningMethodHS256, []byte(pub), kid, goodClaims()), ErrTokenAlgorithm},
		{"HS256 with a secret", signRaw(t, jwt.SigningMethodHS256, secret, "", goodClaims()), ErrTokenAlgorithm},
		{"ES256", signRaw(t, jwt.SigningMethodES256, ec, kid, goodClaims()), ErrTokenAlgorithm},
		{"unregistered alg", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"XYZ","kid":"`+kid+`"}`)) + "." + parts[1] + "." + parts[2], ErrTokenAlgorithm},
		{"unknown kid", signRaw(t, jwt.SigningMethodEdDSA, other, KeyID(other.Public().(ed25519.PublicKey)), goodClaims()), ErrTokenUnknownKey},
		{"no kid", signRaw(t, jwt.SigningMethodEdDSA, key, "", goodClaims()), ErrTokenUnknownKey},
		{"right kid, other key", signRaw(t, jwt.SigningMethodEdDSA, other, kid, goodClaims()), ErrTokenSignature},
		{"tampered claims", tampered, ErrTokenSignature},
		{"two segments", parts[0] + "." + parts[1], ErrTokenMalformed},
		{"garbage", "not-a-token", ErrTokenMalformed},
		{"empty", "", ErrTokenMalformed},
		{"bad base64", "!!!." + parts[1] + "." + parts[2], ErrTokenMalformed},
		{"padded base64", parts[0] + "=." + parts[1] + "." + parts[2], ErrTokenMalformed},
		{"huge", strings.Repeat("a", maxTokenLen+1), ErrTokenMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(tt.token)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Verify() = %v, want %v", err, tt.want)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidToken) {
					t.Errorf("Verify() = %v, does not wrap ErrInvalidToken", err)
				}
				if !strings.HasPrefix(err.Error(), "invalid gateway token: ") {
					t.Errorf("Verify() text = %q", err.Error())
				}
				return
			}
			if c.ID != "jti-1" || !c.AllowsProvider("anthropic") {
				t.Errorf("Verify() claims = %+v", c)
			}
		})
	}
}

func TestVerifyHS256(t *testing.T) {
	secret := []byte(strings.Repeat("k", 32))
	key := newKey(t)
	cfg := TokenConfig{Now: fixedClock(t0)}
	if _, err := NewVerifier(cfg, nil, secret[:31]); err == nil {
		t.Error("NewVerifier(31-byte secret) = nil error, want one")
	}
	if _, err := NewIssuer(cfg, nil, secret[:31]); err == nil {
		t.Error("NewIssuer(31-byte secret) = nil error, want one")
	}
	iss, err := NewIssuer(cfg, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := iss.Mint(Grant{Providers: []string{"openai"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(cfg, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tok); err != nil {
		t.Errorf("Verify(HS256 minted) = %v", err)
	}
	// Compatibility: an HS256 token without kid from another minter.
	if _, err := v.Verify(signRaw(t, jwt.SigningMethodHS256, secret, "", goodClaims())); err != nil {
		t.Errorf("Verify(HS256 without kid) = %v", err)
	}
	if _, err := v.Verify(signRaw(t, jwt.SigningMethodHS256, secret, "some-other-kid", goodClaims())); !errors.Is(err, ErrTokenUnknownKey) {
		t.Errorf("Verify(HS256 other kid) = %v, want ErrTokenUnknownKey", err)
	}
	if _, err := v.Verify(signRaw(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), "", goodClaims())); !errors.Is(err, ErrTokenSignature) {
		t.Errorf("Verify(HS256 other secret) = %v, want ErrTokenSignature", err)
	}
	// EdDSA is refused by an HS256-only verifier.
	pub := key.Public().(ed25519.PublicKey)
	if _, err := v.Verify(signRaw(t, jwt.SigningMethodEdDSA, key, KeyID(pub), goodClaims())); !errors.Is(err, ErrTokenAlgorithm) {
		t.Errorf("Verify(EdDSA to HS256 verifier) = %v, want ErrTokenAlgorithm", err)
	}
}

func TestKeyRotation(t *testing.T) {
	oldKey, newK := newKey(t), newKey(t)
	cfg := TokenConfig{Now: fixedClock(t0)}
	oldIss, _ := NewIssuer(cfg, oldKey, nil)
	newIss, _ := NewIssuer(cfg, newK, nil)
	if oldIss.KeyID() == newIss.KeyID() {
		t.Fatal("two keys have the same kid")
	}
	oldTok, _, _ := oldIss.Mint(Grant{Providers: []string{"anthropic"}})
	newTok, _, _ := newIss.Mint(Grant{Providers: []string{"anthropic"}})
	both, err := NewVerifier(cfg, []ed25519.PublicKey{oldKey.Public().(ed25519.PublicKey), newK.Public().(ed25519.PublicKey)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"old": oldTok, "new": newTok} {
		if _, err := both.Verify(tok); err != nil {
			t.Errorf("Verify(%s-key token) during rotation = %v", name, err)
		}
	}
	newOnly, _ := NewVerifier(cfg, []ed25519.PublicKey{newK.Public().(ed25519.PublicKey)}, nil)
	if _, err := newOnly.Verify(oldTok); !errors.Is(err, ErrTokenUnknownKey) {
		t.Errorf("Verify(old-key token) after rotation = %v, want ErrTokenUnknownKey", err)
	}
}

func TestVerifyCache(t *testing.T) {
	key := newKey(t)
	now := t0
	clock := func() time.Time { return now }
	cfg := TokenConfig{Now: clock}
	iss, _ := NewIssuer(cfg, key, nil)
	v, _ := NewVerifier(cfg, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, nil)
	tok, _, err := iss.Mint(Grant{Providers: []string{"anthropic"}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := v.Verify(tok)
	if err != nil || c2 != c1 {
		t.Fatalf("second Verify() = %p, %v; want the cached claims %p", c2, err, c1)
	}
	now = t0.Add(time.Minute + DefaultLeeway)
	if _, err := v.Verify(tok); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("Verify(cached, after exp+leeway) = %v, want ErrTokenExpired", err)
	}
	// A tampered copy is not served from the cache.
	if _, err := v.Verify(tok + "x"); err == nil {
		t.Error("Verify(tampered) = nil error")
	}
}

func TestIssuerMint(t *testing.T) {
	key := newKey(t)
	iss, err := NewIssuer(TokenConfig{Now: fixedClock(t0.Add(500 * time.Millisecond))}, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, c, err := iss.Mint(Grant{Providers: []string{"anthropic"}, Models: []string{"m1"}, RunID: "r1", Tenant: "agents", Agent: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.ExpiresAt.Equal(t0.Add(DefaultTokenTTL)) || !c.IssuedAt.Equal(t0) || !c.NotBefore.Equal(t0) {
		t.Errorf("Mint() times iat=%v nbf=%v exp=%v, want whole seconds from %v", c.IssuedAt, c.NotBefore, c.ExpiresAt, t0)
	}
	if len(c.ID) != 22 {
		t.Errorf("Mint() jti = %q, want 22 base64url characters", c.ID)
	}
	p := jwt.NewParser()
	parsed, _, err := p.ParseUnverified(tok, &Claims{})
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Header["alg"] != "EdDSA" || parsed.Header["kid"] != KeyID(key.Public().(ed25519.PublicKey)) || parsed.Header["typ"] != "JWT" {
		t.Errorf("header = %v", parsed.Header)
	}
	got := parsed.Claims.(*Claims)
	if got.RunID != "r1" || got.Tenant != "agents" || got.Agent != "run-1" || got.Models[0] != "m1" {
		t.Errorf("claims = %+v", got)
	}
	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, MaxTokenTTL + time.Second} {
		if _, _, err := iss.Mint(Grant{Providers: []string{"a"}, TTL: ttl}); err == nil {
			t.Errorf("Mint(TTL %v) = nil error", ttl)
		}
	}
	if _, _, err := iss.Mint(Grant{}); err == nil {
		t.Error("Mint(no providers) = nil error")
	}
}

func TestKeyID(t *testing.T) {
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	if got, want := KeyID(pub), "Zmh6rfhivXc"; got != want {
		t.Errorf("KeyID(zero key) = %q, want %q", got, want)
	}
}

func TestLoadOrCreateSigningKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", SigningKeyFile)
	k1, err := LoadOrCreateSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, want 0600", fi.Mode().Perm())
	}
	k2, err := LoadOrCreateSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Error("second LoadOrCreateSigningKey() returned a different key")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("key directory holds %d entries, want only the key", len(entries))
	}

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	bad := map[string][]byte{
		"not pem":   []byte("hello"),
		"wrong key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		"bad der":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
		"rsa label": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}),
	}
	for name, b := range bad {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			os.WriteFile(p, b, 0o600)
			if _, err := LoadOrCreateSigningKey(p); err == nil {
				t.Errorf("LoadOrCreateSigningKey(%s) = nil error", name)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	key := newKey(f)
	cfg := TokenConfig{Now: fixedClock(t0)}
	iss, _ := NewIssuer(cfg, key, nil)
	good, _, _ := iss.Mint(Grant{Providers: []string{"anthropic"}, Models: []string{"m"}})
	v, _ := NewVerifier(cfg, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, []byte(strings.Repeat("s", 32)))
	for _, s := range []string{good, "", ".", "..", "a.b.c", good + "x", strings.TrimSuffix(good, good[len(good)-3:]),
		"eyJhbGciOiJub25lIn0.e30.", "eyJhbGciOiJIUzI1NiJ9.e30.AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(tok)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify(%q) = %v, not an ErrInvalidToken", tok, err)
			}
			if strings.Contains(err.Error(), tok) && len(tok) > 8 {
				t.Fatalf("Verify error %q holds the token", err)
			}
			return
		}
		if c.ID == "" || len(c.Providers) == 0 {
			t.Fatalf("Verify(%q) accepted claims %+v", tok, c)
		}
	})
}
