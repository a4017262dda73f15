package gateway

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentcustody/custody/internal/keyfile"
	"github.com/agentcustody/custody/internal/metering"
)

// Token limits and defaults.
const (
	// DefaultTokenTTL is the lifetime of a minted token when none is asked for.
	DefaultTokenTTL = 30 * time.Minute
	// MaxTokenTTL is the longest lifetime a token may be minted with.
	MaxTokenTTL = 24 * time.Hour
	// DefaultIssuer is the default iss claim.
	DefaultIssuer = "custody"
	// DefaultAudience is the default aud claim.
	DefaultAudience = "custody-gateway"
	// DefaultLeeway is the default clock skew allowed on exp, nbf and iat.
	DefaultLeeway = 5 * time.Second
	// NoLeeway, as a Leeway, allows no clock skew at all: exp and nbf are
	// exact (to the second).
	NoLeeway time.Duration = -1
	// MaxLeeway is the largest Leeway accepted. A leeway is added to every
	// token's life (a token is usable that long after its exp), so one
	// beyond a few minutes means the clocks need fixing, not tolerating.
	MaxLeeway = 5 * time.Minute
	// MinHMACSecret is the shortest HS256 secret accepted, in bytes.
	MinHMACSecret = 32
	// SigningKeyFile is the conventional name of the Ed25519 signing key
	// inside the data directory (see [LoadOrCreateSigningKey]).
	SigningKeyFile = "gateway-ed25519.pem"
)

// Claims is the claims set of a gateway token (RFC 7519 §4). Registered
// claims (iss, aud, exp, nbf, iat, jti) come from the embedded
// [jwt.RegisteredClaims]; the rest are custody's private claims.
type Claims struct {
	jwt.RegisteredClaims
	// Providers the token may call (path segment of the data plane:
	// "anthropic", "openai", "gemini", or a configured name). Never empty.
	Providers []string `json:"providers"`
	// Models, if present, is an allow-list of model names: the request's
	// model (JSON body field "model" for anthropic and openai kinds, the
	// path segment models/{model}:... for gemini) must be in it.
	Models []string `json:"models,omitempty"`
	// Repos, for providers of [KindGitHub], are the repositories the
	// token may use and how (see [RepoGrant]); a token without repos may
	// not use such a provider at all.
	Repos []RepoGrant `json:"repos,omitempty"`
	// Tenant is the sandbox's namespace the token was minted for.
	Tenant string `json:"tenant,omitempty"`
	// Agent is the SandboxClaim's name the token was minted for.
	Agent string `json:"agent,omitempty"`
	// RunID names the execution the token belongs to.
	RunID string `json:"run_id,omitempty"`
	// Budget, if present, limits what requests with this token may use
	// (requests, input and output tokens; 0 for no limit on a counter),
	// and RunBudget what all the tokens of its run may use together; see
	// internal/metering. Both are recorded at mint and compared at use.
	Budget    *metering.Usage `json:"budget,omitempty"`
	RunBudget *metering.Usage `json:"run_budget,omitempty"`
}

// budgets are the token's budget claims, zero where absent.
func (c *Claims) budgets() (token, run metering.Usage) {
	if c.Budget != nil {
		token = *c.Budget
	}
	if c.RunBudget != nil {
		run = *c.RunBudget
	}
	return token, run
}

// AllowsProvider reports whether the token is scoped to provider p.
func (c *Claims) AllowsProvider(p string) bool { return slices.Contains(c.Providers, p) }

// AllowsModel reports whether the token may call model m: always when it
// has no models allow-list.
func (c *Claims) AllowsModel(m string) bool {
	return len(c.Models) == 0 || (m != "" && slices.Contains(c.Models, m))
}

// TokenConfig is what an [Issuer] and a [Verifier] agree on.
type TokenConfig struct {
	// Issuer is the iss claim written and required. Default [DefaultIssuer].
	Issuer string
	// Audience is the aud claim written and required. Default
	// [DefaultAudience].
	Audience string
	// Leeway is the clock skew allowed when checking exp and nbf. Zero
	// means [DefaultLeeway]; [NoLeeway] means none; other negative values
	// and values over [MaxLeeway] are errors.
	Leeway time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// CacheSize bounds the verifier's cache of tokens whose signature was
	// already checked (keyed by SHA-256 of the token; entries live until
	// exp + Leeway). Zero means 100000; negative disables the cache.
	CacheSize int
}

func (c TokenConfig) withDefaults() (TokenConfig, error) {
	if (c.Leeway < 0 && c.Leeway != NoLeeway) || c.Leeway > MaxLeeway {
		return c, fmt.Errorf("gateway: Leeway %v outside [0, %v]", c.Leeway, MaxLeeway)
	}
	if c.Leeway == 0 {
		c.Leeway = DefaultLeeway
	}
	if c.Issuer == "" {
		c.Issuer = DefaultIssuer
	}
	if c.Audience == "" {
		c.Audience = DefaultAudience
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CacheSize == 0 {
		c.CacheSize = 100000
	}
	return c, nil
}

// leeway is the clock skew to allow: Leeway, or zero for [NoLeeway].
func (c TokenConfig) leeway() time.Duration { return max(c.Leeway, 0) }

// KeyID is the kid of an Ed25519 public key: base64url (no padding) of
// the first 8 bytes of SHA-256 of the 32-byte key, 11 characters.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:8])
}

// hmacKeyID is the kid written on HS256 tokens: like [KeyID], over a
// domain-separated hash of the secret so that it reveals nothing usable.
func hmacKeyID(secret []byte) string {
	h := sha256.New()
	h.Write([]byte("custody gateway hs256 kid\x00"))
	h.Write(secret)
	return "hs-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:8])
}

// Grant is what a token is minted for.
type Grant struct {
	// Providers the token may call; required.
	Providers []string
	// Models is the optional model allow-list.
	Models []string
	// Repos are the repositories the token may use through providers of
	// [KindGitHub] (see [CheckRepoGrants]); none means no repository.
	Repos []RepoGrant
	// TTL is the token's lifetime. Zero means [DefaultTokenTTL].
	TTL time.Duration
	// RunID, Tenant and Agent are recorded in the token and the store.
	RunID, Tenant, Agent string
	// Budget limits the token's own use and RunBudget its run's (see
	// [Claims.Budget]); zero is none. No counter may be negative.
	Budget, RunBudget metering.Usage
}

// Issuer mints gateway tokens. It is safe for concurrent use.
type Issuer struct {
	cfg    TokenConfig
	method jwt.SigningMethod
	key    any
	kid    string
}

// NewIssuer returns an Issuer that signs with the Ed25519 key if it is
// not nil, and otherwise with HS256 and hmacSecret (at least
// [MinHMACSecret] bytes).
func NewIssuer(cfg TokenConfig, key ed25519.PrivateKey, hmacSecret []byte) (*Issuer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case key != nil:
		if len(key) != ed25519.PrivateKeySize {
			return nil, errors.New("gateway: invalid Ed25519 signing key")
		}
		pub := key.Public().(ed25519.PublicKey)
		return &Issuer{cfg: cfg, method: jwt.SigningMethodEdDSA, key: key, kid: KeyID(pub)}, nil
	case hmacSecret != nil:
		if len(hmacSecret) < MinHMACSecret {
			return nil, fmt.Errorf("gateway: HMAC secret is %d bytes, want at least %d", len(hmacSecret), MinHMACSecret)
		}
		return &Issuer{cfg: cfg, method: jwt.SigningMethodHS256, key: slices.Clone(hmacSecret), kid: hmacKeyID(hmacSecret)}, nil
	}
	return nil, errors.New("gateway: an Ed25519 key or an HMAC secret is required to mint")
}

// KeyID is the kid this issuer writes in the token header.
func (i *Issuer) KeyID() string { return i.kid }

// Mint signs a token for g. It does not record it anywhere; see
// [Gateway.Mint] for the recorded path. iat and nbf are now and exp is
// now + TTL, all in whole seconds.
func (i *Issuer) Mint(g Grant) (string, *Claims, error) {
	if len(g.Providers) == 0 {
		return "", nil, errors.New("gateway: a token needs at least one provider")
	}
	ttl := g.TTL
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	if ttl < time.Second || ttl > MaxTokenTTL {
		return "", nil, fmt.Errorf("gateway: token TTL %v outside [1s, %v]", ttl, MaxTokenTTL)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("gateway: read random: %w", err)
	}
	now := i.cfg.Now().UTC().Truncate(time.Second)
	c := &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.cfg.Issuer,
			Audience:  jwt.ClaimStrings{i.cfg.Audience},
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        base64.RawURLEncoding.EncodeToString(raw[:]),
		},
		Providers: slices.Clone(g.Providers),
		Models:    slices.Clone(g.Models),
		Repos:     slices.Clone(g.Repos),
		Tenant:    g.Tenant,
		Agent:     g.Agent,
		RunID:     g.RunID,
	}
	if !g.Budget.IsZero() {
		b := g.Budget
		c.Budget = &b
	}
	if !g.RunBudget.IsZero() {
		b := g.RunBudget
		c.RunBudget = &b
	}
	t := jwt.NewWithClaims(i.method, c)
	t.Header["kid"] = i.kid
	s, err := t.SignedString(i.key)
	if err != nil {
		return "", nil, fmt.Errorf("gateway: sign token: %w", err)
	}
	return s, c, nil
}

// Verifier checks gateway tokens: signature (by kid), algorithm
// allow-list, exp, nbf and iat with leeway, iss, aud, the presence of
// iat, jti and providers, and a lifetime (exp - iat) of at most
// [MaxTokenTTL], the longest the admin plane mints: a token that claims
// more was not minted by it (a leaked signing key). It does not know
// about revocation or the store ([Gateway] checks the jti was minted). It is safe for
// concurrent use.
type Verifier struct {
	cfg     TokenConfig
	parser  *jwt.Parser
	methods []string
	edKeys  map[string]ed25519.PublicKey
	hmac    []byte
	hmacKID string
	// cache remembers tokens (by SHA-256) whose signature and claims
	// were checked, until their exp + leeway. Only successful
	// verifications enter it, so it cannot be filled with forgeries.
	cache *expiringCache[[32]byte, *Claims]
}

// errUnknownKID is returned by the key function for a kid it does not
// know.
var errUnknownKID = errors.New("unknown kid")

// NewVerifier returns a Verifier that accepts EdDSA tokens signed by any
// of publicKeys (selected by kid, see [KeyID]) and, if hmacSecret is not
// nil, HS256 tokens signed with it (kid absent or matching). Any other
// alg, "none" included, is refused.
func NewVerifier(cfg TokenConfig, publicKeys []ed25519.PublicKey, hmacSecret []byte) (*Verifier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &Verifier{cfg: cfg, edKeys: map[string]ed25519.PublicKey{}}
	for _, k := range publicKeys {
		if len(k) != ed25519.PublicKeySize {
			return nil, errors.New("gateway: invalid Ed25519 public key")
		}
		v.edKeys[KeyID(k)] = slices.Clone(k)
	}
	if len(v.edKeys) > 0 {
		v.methods = append(v.methods, jwt.SigningMethodEdDSA.Alg())
	}
	if hmacSecret != nil {
		if len(hmacSecret) < MinHMACSecret {
			return nil, fmt.Errorf("gateway: HMAC secret is %d bytes, want at least %d", len(hmacSecret), MinHMACSecret)
		}
		v.hmac = slices.Clone(hmacSecret)
		v.hmacKID = hmacKeyID(hmacSecret)
		v.methods = append(v.methods, jwt.SigningMethodHS256.Alg())
	}
	if len(v.methods) == 0 {
		return nil, errors.New("gateway: a verifier needs an Ed25519 public key or an HMAC secret")
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(v.methods),
		jwt.WithLeeway(cfg.leeway()),
		jwt.WithTimeFunc(cfg.Now),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithStrictDecoding(),
	)
	if cfg.CacheSize > 0 {
		v.cache = newExpiringCache[[32]byte, *Claims](cfg.CacheSize)
	}
	return v, nil
}

func (v *Verifier) keyFunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	switch t.Method.Alg() {
	case jwt.SigningMethodEdDSA.Alg():
		if k, ok := v.edKeys[kid]; ok {
			return k, nil
		}
	case jwt.SigningMethodHS256.Alg():
		if kid == "" || kid == v.hmacKID {
			return v.hmac, nil
		}
	}
	return nil, errUnknownKID
}

// maxTokenLen bounds the token string; real tokens are well under 2 KiB.
const maxTokenLen = 8 << 10

// Verify checks token and returns its claims, which the caller must not
// modify. It fails with an error wrapping [ErrInvalidToken] whose text is
// "invalid gateway token: <reason>" and never contains the token.
//
// A token whose signature was checked before is found in a cache by the
// SHA-256 of its string, and only its times are checked again; its cost is
// then one hash instead of a signature verification.
func (v *Verifier) Verify(token string) (*Claims, error) {
	if token == "" || len(token) > maxTokenLen {
		return nil, ErrTokenMalformed
	}
	var sum [32]byte
	if v.cache != nil {
		sum = sha256.Sum256([]byte(token))
		if c, until, ok := v.cache.get(sum); ok {
			now := v.cfg.Now()
			if !now.Before(until) {
				return nil, ErrTokenExpired
			}
			return c, nil
		}
	}
	c := new(Claims)
	t, err := v.parser.ParseWithClaims(token, c, v.keyFunc)
	if err != nil {
		return nil, v.reason(t, c, err)
	}
	if c.ID == "" || len(c.Providers) == 0 || c.IssuedAt == nil {
		return nil, ErrTokenMalformed
	}
	if c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxTokenTTL {
		return nil, ErrTokenLifetime
	}
	if v.cache != nil {
		v.cache.put(sum, c, c.ExpiresAt.Add(v.cfg.leeway()), v.cfg.Now())
	}
	return c, nil
}

// reason maps a jwt error to one of the fixed refusal reasons.
func (v *Verifier) reason(t *jwt.Token, c *Claims, err error) error {
	switch {
	case errors.Is(err, errUnknownKID):
		return ErrTokenUnknownKey
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrTokenMalformed
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// alg missing or not registered with the jwt package.
		return ErrTokenAlgorithm
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if t == nil || t.Method == nil || !slices.Contains(v.methods, t.Method.Alg()) {
			return ErrTokenAlgorithm
		}
		return ErrTokenSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrTokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ErrTokenNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ErrTokenIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ErrTokenAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		if c.Issuer != v.cfg.Issuer {
			return ErrTokenIssuer
		}
		if !slices.Contains(c.Audience, v.cfg.Audience) {
			return ErrTokenAudience
		}
	}
	return ErrTokenMalformed
}

// expiringCache is a bounded map whose entries live until a time of
// their own. When it is full, expired entries are swept (at most once a
// second) and, if it is still full, new entries are not kept: a flood
// costs the cache's benefit, never memory. It is safe for concurrent
// use.
type expiringCache[K comparable, V any] struct {
	size int

	mu      sync.RWMutex
	entries map[K]expiring[V]
	sweepAt time.Time
}

type expiring[V any] struct {
	val   V
	until time.Time
}

func newExpiringCache[K comparable, V any](size int) *expiringCache[K, V] {
	return &expiringCache[K, V]{size: size, entries: make(map[K]expiring[V])}
}

// get returns k's value and the time it lives until, expired or not.
func (ec *expiringCache[K, V]) get(k K) (V, time.Time, bool) {
	ec.mu.RLock()
	e, ok := ec.entries[k]
	ec.mu.RUnlock()
	return e.val, e.until, ok
}

// remove drops k.
func (ec *expiringCache[K, V]) remove(k K) {
	ec.mu.Lock()
	delete(ec.entries, k)
	ec.mu.Unlock()
}

func (ec *expiringCache[K, V]) put(k K, v V, until, now time.Time) {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if len(ec.entries) >= ec.size && now.After(ec.sweepAt) {
		for k, e := range ec.entries {
			if !now.Before(e.until) {
				delete(ec.entries, k)
			}
		}
		ec.sweepAt = now.Add(time.Second)
	}
	if len(ec.entries) < ec.size {
		ec.entries[k] = expiring[V]{val: v, until: until}
	}
}

// LoadOrCreateSigningKey returns the Ed25519 private key in the PEM file
// at path (a "PRIVATE KEY" block, PKCS#8), creating it with mode 0600 if
// it does not exist (see package keyfile).
func LoadOrCreateSigningKey(path string) (ed25519.PrivateKey, error) {
	k, err := keyfile.LoadOrCreateEd25519(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: signing key: %w", err)
	}
	return k, nil
}
