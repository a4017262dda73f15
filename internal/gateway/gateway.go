// Package gateway is custody's model-credential gateway: a reverse proxy
// that holds the real model-provider API keys and admits sandboxes only
// with short-lived, revocable, per-execution gateway tokens.
//
// The data plane ([Gateway.DataHandler], default port 8866) serves
// /{provider}/... for every configured provider ("anthropic", "openai",
// "gemini", "github" and any OpenAI-compatible provider with a base URL,
// or declared HTTP API of [KindHTTP]). An
// unmodified SDK works when its base URL points at the gateway
// (http://gw:8866/anthropic) and its API key is the gateway token: the
// token is taken from "Authorization: Bearer", "x-api-key",
// "x-goog-api-key" or "api-key" (any letter case) or the "key" query
// parameter; all of them are stripped, the real key is injected in the
// provider's own header and the request is proxied with server-sent
// events streamed unbuffered. Checks run in this order and a refused
// request never touches the real key:
//
//	provider configured              else 404 unknown provider <p>
//	a token presented (only one)     else 401 missing gateway token
//	token verifies                   else 401 invalid gateway token: <reason>
//	token minted (claims recorded)   else 401 invalid gateway token: not minted by this gateway
//	                                   (503 ...: cannot be checked now, if the store does not answer)
//	provider in the token's scope    else 403 token not valid for provider <p>
//	revocation view current          else 503 gateway revocation view is stale
//	token not revoked                else 401 gateway token revoked
//	method and path allowed for <p>  else 403 path not allowed for provider <p>: <class>
//	repository in the token's repos  else 403 token not valid for repository <owner/name>
//	  (kind github), with write access if it writes
//	                                 else 403 token not valid for writing to repository <owner/name>
//	body read for provider-run tools else 400/413 request body cannot be checked: <why>
//	  (model kinds only, unless ProviderTools)
//	no provider-run tool in the body else 403 provider-run tool not allowed for provider <p>: <member>
//	  (see [ErrProviderTool])
//	model in the token's models      else 403 token not valid for model <m>
//	  (model kinds only)
//	gateway holds a key for <p>      else 502 gateway holds no key for provider <p>
//	request fits its budgets         else 402 budget exceeded
//	                                   (503 budget cannot be checked now, if the store
//	                                   does not answer; 400 request cannot be metered)
//
// The path allow-list admits by default only the inference endpoints the
// official SDKs use ([DefaultAllowPaths]); <class> is the endpoint's
// first segment after the version ("files", "batches"). Refusals are
// text/plain, one line, from that finite set, and carry
// "x-should-retry: false" (a 429 or 503 would carry Retry-After); reasons are
// expired, not yet valid, bad signature, malformed, wrong issuer, wrong
// audience, unexpected algorithm, unknown key id, conflicting tokens,
// lifetime over the maximum, not minted by this gateway and cannot be
// checked now.
// Upstream failures answer 502 "upstream unavailable" or 504 "upstream
// timeout". No response and no log line ever holds a real key, a token or
// the upstream URL: the upstream is asked for identity encoding (a
// content-encoded answer is refused with 502, since it could not be
// checked), a response header holding a key of the provider is dropped,
// a redirect's Location and a Link header's targets pointing at the
// upstream are taken back under /{provider} (so that the client follows
// them through the gateway),
// and every response body and trailer is scrubbed on its way back,
// streaming, with each such key replaced by "[redacted]".
//
// # Brokered credentials
//
// The gateway also holds credentials that are not model keys, handed out
// the same way (a per-run token, revoked at exit). A provider of
// [KindHTTP] is a declared HTTP API: its real credential (the KeysDir
// file named after it) goes in a declared header, after an optional
// prefix, or as the password of HTTP Basic auth with a declared username
// ([ProviderAuth]); it forwards only its declared "[METHOD ]PATH" rules
// (there are no defaults). A provider of [KindGitHub] (built in as
// "github") serves GitHub: git smart HTTP under
// /github/OWNER/NAME[.git]/{info/refs,git-upload-pack,git-receive-pack}
// goes to the git upstream (default https://github.com, only for the
// default REST upstream: another one needs its own) with Basic
// "x-access-token:<credential>", everything else to the REST upstream
// (default https://api.github.com) with "Authorization: Bearer
// <credential>", and only the REST endpoints under /repos/OWNER/NAME of
// [DefaultAllowPaths] are admitted. Every github request must name a
// repository in the token's repos ([RepoGrant], compared ignoring letter
// case): clone, fetch and REST GET need read, push and the other REST
// methods write. For both kinds the gateway token is also taken as the
// password of "Authorization: Basic" (its username is ignored), and a 401
// refusal carries a Basic challenge besides the Bearer one, so that git
// (which shows a refusal's text as "remote: <text>") and other
// Basic-only tools send it. Models do not apply to them.
//
// The admin plane ([Gateway.AdminHandler]) mints tokens and revokes them;
// the caller mounts it on a listener sandboxes cannot reach and
// authenticates it. Revocations are durable in the [Store], kept until the
// token's own exp (plus leeway and an hour of grace) and checked on every
// request against an in-memory set that the revoking replica updates at
// once and other replicas as soon as the store tells them
// ([Gateway.ApplyRevocation], e.g. PostgreSQL LISTEN/NOTIFY) and, as the
// fallback, from the store every [Options.PollInterval]. Revoking a token
// also cuts its requests in flight, streams included: a server-sent event
// stream ends, after its last whole event, with the provider's own
// in-stream error event carrying "gateway token revoked" (so each SDK
// raises a typed API error, not an unexpected EOF); any other body is cut.
//
// # Usage and budgets
//
// With a meter ([Options.Meter], internal/metering), every request that
// passed the checks is metered once from the provider's own usage fields
// as the response streams by (see internal/tooluse), and held to the
// budgets of its token (the "budget" claim), its run ("run_budget") and
// its tenant (the operator's policy): before forwarding, one request, the
// declared maximum output and a quarter of the body's bytes as input are
// reserved on all of them at once in the store, or the request is refused
// with 402 "budget exceeded" (x-should-retry: false) and never forwarded.
// Under an output limit a body that declares no maximum gets the meter's
// default one; an OpenAI chat stream that does not ask for its usage is
// made to, and that usage-only chunk is kept from the client. A stream
// whose reported usage crosses what it reserved extends the reservation
// or, if that does not fit, ends after its last whole event with the
// provider's in-stream error event carrying "budget exceeded". When the
// response ends the reservation is settled at what was reported (at least
// the reservation when the stream was cut or never reported usage).
//
// # Format
//
// A gateway token is a JWT (RFC 7519) in JWS compact serialization
// (RFC 7515): three base64url (no padding) segments joined by dots,
//
//	base64url(header) "." base64url(claims) "." base64url(signature)
//
// The header is
//
//	{"alg":"EdDSA","kid":"<kid>","typ":"JWT"}
//
// where alg is EdDSA (Ed25519, RFC 8037) by default or HS256 (HMAC-SHA256
// with a shared secret of at least 32 bytes) for compatibility; no other
// alg, and never "none", is accepted. For EdDSA, kid is [KeyID] of the
// signing key's public key (base64url of the first 8 bytes of its SHA-256,
// 11 characters), so the signing key can be rotated while verifiers hold
// only public keys. The claims set is, for example,
//
//	{"iss":"custody","aud":["custody-gateway"],"exp":1800001800,
//	 "nbf":1800000000,"iat":1800000000,"jti":"3q1uXnXkQw2cL0m8Zk3f1A",
//	 "providers":["anthropic","github"],"models":["claude-sonnet-4-5"],
//	 "repos":[{"repo":"octo/hello","access":"read"}],
//	 "tenant":"agents","agent":"run-1","run_id":"r1"}
//
// Times are NumericDates in whole seconds. jti is base64url of 16 random
// bytes. exp, iat, jti and providers are required, exp - iat is at most
// [MaxTokenTTL] (24 h), and the jti must be recorded in the [Store] with
// the same exp, iat, providers, models, repos, run_id, tenant and agent
// (so a token signed with a leaked key is still refused); models, repos,
// tenant, agent and run_id are optional. exp and nbf are checked with a leeway
// ([Options.Leeway], default 5 s, at most 5 min; serve flag
// --gateway-clock-leeway).
package gateway

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentcustody/custody/internal/metering"
)

// Sentinel errors. Callers test them with errors.Is; [HTTPStatusFor] maps
// them to status codes. The text of every data-plane refusal is the
// error's text, which is built only from these sentinels and configured
// provider or model names, never from a key or a token.
var (
	// ErrUnknownProvider: the first path segment names no configured
	// provider.
	ErrUnknownProvider = errors.New("unknown provider")
	// ErrMissingToken: no gateway token in any of the accepted places.
	ErrMissingToken = errors.New("missing gateway token")
	// ErrInvalidToken is the parent of every reason a token fails to
	// verify.
	ErrInvalidToken     = errors.New("invalid gateway token")
	ErrTokenExpired     = fmt.Errorf("%w: expired", ErrInvalidToken)
	ErrTokenNotYetValid = fmt.Errorf("%w: not yet valid", ErrInvalidToken)
	ErrTokenSignature   = fmt.Errorf("%w: bad signature", ErrInvalidToken)
	ErrTokenMalformed   = fmt.Errorf("%w: malformed", ErrInvalidToken)
	ErrTokenIssuer      = fmt.Errorf("%w: wrong issuer", ErrInvalidToken)
	ErrTokenAudience    = fmt.Errorf("%w: wrong audience", ErrInvalidToken)
	ErrTokenAlgorithm   = fmt.Errorf("%w: unexpected algorithm", ErrInvalidToken)
	ErrTokenUnknownKey  = fmt.Errorf("%w: unknown key id", ErrInvalidToken)
	// ErrTokenLifetime: exp - iat is over [MaxTokenTTL], more than the
	// admin plane mints.
	ErrTokenLifetime = fmt.Errorf("%w: lifetime over the maximum", ErrInvalidToken)
	// ErrTokenNotMinted: no minted token is recorded with this jti and
	// these claims (the signing key has leaked, or the record was pruned).
	ErrTokenNotMinted = fmt.Errorf("%w: not minted by this gateway", ErrInvalidToken)
	// ErrTokenUnchecked: the store could not be asked whether the jti
	// was minted; the token is refused (503, fail closed) until it can.
	ErrTokenUnchecked = fmt.Errorf("%w: cannot be checked now", ErrInvalidToken)
	// ErrTokenConflict: two different tokens in one request.
	ErrTokenConflict = fmt.Errorf("%w: conflicting tokens", ErrInvalidToken)
	// ErrForbidden is the parent of the scope refusals.
	ErrForbidden = errors.New("token not valid")
	// ErrProviderScope: the provider is not in the token's providers.
	ErrProviderScope = fmt.Errorf("%w for provider", ErrForbidden)
	// ErrModelScope: the request's model is not in the token's models.
	ErrModelScope = fmt.Errorf("%w for model", ErrForbidden)
	// ErrRepoScope: a request to a provider of [KindGitHub] names no
	// repository in the token's repos (or none at all); its text goes on
	// with the repository, e.g. "token not valid for repository
	// octo/hello", "(none)" or "(invalid name)".
	ErrRepoScope = fmt.Errorf("%w for repository", ErrForbidden)
	// ErrRepoWriteScope: a request that writes (git push, a REST method
	// other than GET and HEAD) names a repository the token may only
	// read, e.g. "token not valid for writing to repository octo/hello".
	ErrRepoWriteScope = fmt.Errorf("%w for writing to repository", ErrForbidden)
	// ErrRevoked: the token was revoked.
	ErrRevoked = errors.New("gateway token revoked")
	// ErrPathNotAllowed: the provider's path allow-list does not admit
	// the request's method and path (see [DefaultAllowPaths]); its text
	// goes on with the provider and the path class, e.g. "path not
	// allowed for provider openai: files".
	ErrPathNotAllowed = errors.New("path not allowed for provider")
	// ErrRevocationStale: this replica's view of revocations is older
	// than [Options.MaxStaleness] (the store has not answered), so it
	// cannot tell whether any token is revoked.
	ErrRevocationStale = errors.New("gateway revocation view is stale")
	// ErrBusy: the request's body would pass what the gateway holds in
	// memory at once (maxHeldBodies); retry.
	ErrBusy = errors.New("gateway is holding too many request bodies")
	// ErrNoProviderKey: the key file for the provider is missing or empty.
	ErrNoProviderKey = errors.New("gateway holds no key for provider")
	// ErrUpstream: the provider could not be reached or failed mid-way.
	ErrUpstream = errors.New("upstream unavailable")
	// ErrUpstreamTimeout: the provider did not answer in time.
	ErrUpstreamTimeout = errors.New("upstream timeout")
	// ErrNotFound is what a [Store] returns for a jti it does not hold.
	ErrNotFound = errors.New("gateway token not found")
	// ErrBadGrant: a mint request asks for something not allowed.
	ErrBadGrant = errors.New("bad token grant")
	// ErrCannotMint: this gateway holds no signing key.
	ErrCannotMint = errors.New("gateway holds no signing key")
	// ErrUnmeterable: a budget applies and the request body does not say
	// plainly what it asks for (not one JSON object, a limit given twice
	// or of the wrong type, too large to read; see metering.Inspect), or
	// an output limit applies to a generating endpoint the meter cannot
	// read (legacy completions).
	ErrUnmeterable = errors.New("request cannot be metered")
)

// DefaultDataAddr is the data plane's conventional listen address.
const DefaultDataAddr = ":8866"

// HTTPStatusFor is the status code the gateway answers for err.
func HTTPStatusFor(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrUnknownProvider), errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrTokenUnchecked):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrMissingToken), errors.Is(err, ErrInvalidToken), errors.Is(err, ErrRevoked):
		return http.StatusUnauthorized
	case errors.Is(err, ErrForbidden), errors.Is(err, ErrPathNotAllowed), errors.Is(err, ErrProviderTool):
		return http.StatusForbidden
	case errors.Is(err, ErrNoProviderKey), errors.Is(err, ErrUpstream):
		return http.StatusBadGateway
	case errors.Is(err, ErrUpstreamTimeout):
		return http.StatusGatewayTimeout
	case errors.Is(err, ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBadGrant), errors.Is(err, ErrUnmeterable), errors.Is(err, ErrBodyUnchecked):
		return http.StatusBadRequest
	case errors.Is(err, metering.ErrBudgetExceeded):
		return http.StatusPaymentRequired
	case errors.Is(err, metering.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrCannotMint), errors.Is(err, ErrRevocationStale), errors.Is(err, ErrBusy):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// refusalFor is the status and one-line text of a data-plane refusal. Only
// errors built by this package from its sentinels keep their text; any
// other error becomes "internal error".
func refusalFor(err error) (int, string) {
	status := HTTPStatusFor(err)
	for _, s := range []error{ErrUnknownProvider, ErrMissingToken, ErrInvalidToken, ErrForbidden, ErrRevoked,
		ErrRevocationStale, ErrBusy, ErrPathNotAllowed, ErrNoProviderKey, ErrUpstream, ErrUpstreamTimeout,
		metering.ErrBudgetExceeded, metering.ErrUnavailable, ErrUnmeterable, ErrProviderTool, ErrBodyUnchecked} {
		if errors.Is(err, s) {
			return status, err.Error()
		}
	}
	return http.StatusInternalServerError, "internal error"
}

// TokenRecord is what the store keeps for a minted token: never the token
// itself.
type TokenRecord struct {
	JTI       string
	IssuedAt  time.Time
	ExpiresAt time.Time
	Providers []string
	// Models is the token's model allow-list as minted: empty and not nil
	// (stored as an empty list) when the token has none. Nil means the
	// record was kept before models were recorded (a NULL column); the
	// minted check refuses such a token, whatever its claims, until it is
	// re-minted. Stores must keep nil and empty apart.
	Models []string
	// Repos is the token's repository grants as minted; nil or empty for
	// none (rows kept before repos were recorded read as none).
	Repos  []RepoGrant
	RunID  string
	Tenant string
	Agent  string
	// Budget and RunBudget are the token's budget claims, zero for none.
	Budget, RunBudget metering.Usage
}

// Revocation is one revoked token.
type Revocation struct {
	// Seq is the revocation's position in the store's revocation log:
	// positive and increasing in commit order, never reused.
	Seq int64
	JTI string
	// RevokedAt is when it was first revoked.
	RevokedAt time.Time
	// ExpiresAt is the token's own exp.
	ExpiresAt time.Time
}

// Store persists minted-token records and revocations. Implementations
// must be safe for concurrent use and durable when a write returns.
//
// RecordToken stores a minted token's record. LookupToken returns the
// record of jti (times in whole seconds), or [ErrNotFound] if none is
// recorded (never minted, or pruned). RevokeToken revokes a
// recorded jti and returns its revocation; revoking again returns the
// first revocation unchanged; a jti not recorded (or already pruned)
// returns [ErrNotFound]. ListRevocations returns every revocation with
// Seq > sinceExclusive in ascending Seq; Seq must be assigned in commit
// order so that a poller holding the largest Seq it has seen misses
// nothing. PruneExpired deletes token records and revocations whose
// ExpiresAt is before before and returns how many rows it deleted.
type Store interface {
	RecordToken(ctx context.Context, rec TokenRecord) error
	LookupToken(ctx context.Context, jti string) (TokenRecord, error)
	RevokeToken(ctx context.Context, jti string, at time.Time) (Revocation, error)
	ListRevocations(ctx context.Context, sinceExclusive int64) ([]Revocation, error)
	PruneExpired(ctx context.Context, before time.Time) (int64, error)
	// RunTokens returns the jtis of the tokens minted for run_id run with
	// that tenant and agent whose exp is not before notBefore.
	RunTokens(ctx context.Context, tenant, agent, run string, notBefore time.Time) ([]string, error)
}

// provider is a configured provider.
type provider struct {
	name  string
	kind  string
	base  *url.URL
	allow []pathRule
	git   *url.URL     // KindGitHub: the git smart HTTP upstream
	auth  ProviderAuth // KindHTTP: where the credential goes
	// providerTools: requests may have the provider connect out
	// (ProviderConfig.ProviderTools).
	providerTools bool
	// forms memoizes secretForms of the last key it was asked for (the
	// key changes only when its file is rotated).
	forms atomic.Pointer[keyForms]
}

// keyForms are the secretForms of key; read-only once stored.
type keyForms struct {
	key   string
	forms [][]byte
}

// Gateway is the model-credential gateway. It is safe for concurrent use.
// [Gateway.Close] stops its background poller.
type Gateway struct {
	store     Store
	providers map[string]*provider
	issuer    *Issuer // nil if this gateway cannot mint
	verifier  *Verifier
	keys      *keyFiles
	revoked   *revocationSet
	minted    *mintedTokens
	inflight  *inflightSet
	held      heldBodies // the same, by token
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	now       func() time.Time
	leeway    time.Duration
	poll      time.Duration
	maxStale  time.Duration
	log       *slog.Logger
	metrics   *metrics
	recorder  Recorder
	meter     *metering.Meter

	cursor int64 // largest revocation Seq applied; owned by the poller

	// freshAt is g.monotonic() at the start of the last successful poll,
	// in nanoseconds; freshened wakes the staleness watcher after one.
	epoch     time.Time
	freshAt   atomic.Int64
	freshened chan struct{}
	pollNow   chan struct{} // see PollNow

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// New validates opts, loads the provider keys and every unexpired
// revocation from the store, and starts the background poller.
func New(ctx context.Context, opts Options) (*Gateway, error) {
	if opts.Store == nil {
		return nil, errors.New("gateway: Store is required")
	}
	if opts.PollInterval < 0 || opts.ResponseHeaderTimeout < 0 {
		return nil, errors.New("gateway: negative PollInterval or ResponseHeaderTimeout")
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Second
	}
	switch {
	case opts.MaxStaleness == 0:
		opts.MaxStaleness = max(5*opts.PollInterval, 2*time.Second)
	case opts.MaxStaleness < 2*opts.PollInterval:
		return nil, fmt.Errorf("gateway: MaxStaleness %v is under 2 × PollInterval (%v)", opts.MaxStaleness, opts.PollInterval)
	}
	if opts.ResponseHeaderTimeout == 0 {
		opts.ResponseHeaderTimeout = 10 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	providers, err := buildProviders(opts.Providers)
	if err != nil {
		return nil, err
	}
	tc := TokenConfig{Issuer: opts.Issuer, Audience: opts.Audience, Leeway: opts.Leeway, Now: opts.Now, CacheSize: opts.VerifyCacheSize}
	tc, err = tc.withDefaults()
	if err != nil {
		return nil, err
	}
	pubs := slices.Clone(opts.VerifyKeys)
	if opts.SigningKey != nil {
		if len(opts.SigningKey) != ed25519.PrivateKeySize {
			return nil, errors.New("gateway: invalid Ed25519 SigningKey")
		}
		pubs = append(pubs, opts.SigningKey.Public().(ed25519.PublicKey))
	}
	verifier, err := NewVerifier(tc, pubs, opts.HMACSecret)
	if err != nil {
		return nil, err
	}
	var issuer *Issuer
	if opts.SigningKey != nil || opts.HMACSecret != nil {
		if issuer, err = NewIssuer(tc, opts.SigningKey, opts.HMACSecret); err != nil {
			return nil, err
		}
	}
	lg := opts.Log.With("service", "gateway")
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	slices.Sort(names)
	g := &Gateway{
		store:     opts.Store,
		providers: providers,
		issuer:    issuer,
		verifier:  verifier,
		keys:      newKeyFiles(opts.KeysDir, names, lg),
		revoked:   newRevocationSet(),
		minted:    newMintedTokens(tc.CacheSize),
		inflight:  newInflightSet(),
		transport: newTransport(opts.UpstreamProxy, opts.ResponseHeaderTimeout),
		now:       opts.Now,
		recorder:  opts.Recorder,
		meter:     opts.Meter,
		leeway:    tc.leeway(),
		poll:      opts.PollInterval,
		maxStale:  opts.MaxStaleness,
		log:       lg,
		metrics:   newMetrics(names),
		done:      make(chan struct{}),
		freshened: make(chan struct{}, 1),
		epoch:     time.Now(),
		pollNow:   make(chan struct{}, 1),
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      scrubbingTransport{g},
		BufferPool:     &bufferPool{},
		FlushInterval:  -1,
		ErrorHandler:   g.proxyError,
		ModifyResponse: g.modifyResponse,
		ErrorLog:       log.New(proxyLogWriter{g}, "", 0),
	}
	g.metrics.watch(g)
	g.keys.refresh(ctx)
	if err := g.pollRevocations(ctx); err != nil {
		return nil, err
	}
	if opts.Metrics != nil {
		if err := g.metrics.register(opts.Metrics); err != nil {
			return nil, err
		}
	}
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	g.stop = stop
	go g.run(pctx)
	return g, nil
}

// Close stops the background poller and closes idle upstream connections.
// Requests in flight are not interrupted.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		g.stop()
		<-g.done
		g.transport.CloseIdleConnections()
	})
	return nil
}

// Verifier is the gateway's token verifier.
func (g *Gateway) Verifier() *Verifier { return g.verifier }

// Issuer is the gateway's token issuer, nil if it holds no signing key.
func (g *Gateway) Issuer() *Issuer { return g.issuer }

// Minted is a freshly minted, recorded token. Token is the secret: hand it
// to one process and never log it.
type Minted struct {
	Token     string
	JTI       string
	ExpiresAt time.Time
	Claims    *Claims
}

// Mint checks grant (providers configured, repos valid and only with a
// provider of [KindGitHub], TTL within [1 s, 24 h], zero
// meaning 30 min), mints a token and records its jti, iat, exp,
// providers, models, repos, run_id, tenant and agent in the store. It fails with an error wrapping [ErrBadGrant]
// or [ErrCannotMint], or with a store error.
func (g *Gateway) Mint(ctx context.Context, grant Grant) (Minted, error) {
	if g.issuer == nil {
		return Minted{}, ErrCannotMint
	}
	if len(grant.Providers) == 0 {
		return Minted{}, fmt.Errorf("%w: providers is required", ErrBadGrant)
	}
	var ps []string
	for _, p := range grant.Providers {
		if _, ok := g.providers[p]; !ok {
			return Minted{}, fmt.Errorf("%w: unknown provider %q", ErrBadGrant, p)
		}
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	grant.Providers = ps
	if err := g.checkRepoGrant(grant); err != nil {
		return Minted{}, err
	}
	for _, m := range grant.Models {
		if m == "" {
			return Minted{}, fmt.Errorf("%w: empty model name", ErrBadGrant)
		}
	}
	if !nonNegative(grant.Budget) || !nonNegative(grant.RunBudget) {
		return Minted{}, fmt.Errorf("%w: budget limits must not be negative", ErrBadGrant)
	}
	if !grant.RunBudget.IsZero() && grant.RunID == "" {
		return Minted{}, fmt.Errorf("%w: run_budget needs run_id (a run's budget is shared by the tokens of that run)", ErrBadGrant)
	}
	if grant.TTL < 0 || (grant.TTL != 0 && grant.TTL < time.Second) || grant.TTL > MaxTokenTTL {
		return Minted{}, fmt.Errorf("%w: ttl must be between 1 s and %v", ErrBadGrant, MaxTokenTTL)
	}
	tok, c, err := g.issuer.Mint(grant)
	if err != nil {
		return Minted{}, err
	}
	rec := TokenRecord{
		JTI: c.ID, IssuedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time,
		Providers: c.Providers, Models: append([]string{}, c.Models...), // never nil: see TokenRecord.Models
		Repos: slices.Clone(c.Repos),
		RunID: c.RunID, Tenant: c.Tenant, Agent: c.Agent,
	}
	rec.Budget, rec.RunBudget = c.budgets()
	if err := g.store.RecordToken(ctx, rec); err != nil {
		return Minted{}, fmt.Errorf("gateway: record token: %w", err)
	}
	g.remember(rec)
	g.metrics.minted.Inc()
	g.log.InfoContext(ctx, "gateway token minted", "jti", c.ID, "providers", c.Providers, "models", c.Models, "repos", c.Repos,
		"run_id", c.RunID, "tenant", c.Tenant, "agent", c.Agent, "expires_at", c.ExpiresAt.Time)
	return Minted{Token: tok, JTI: c.ID, ExpiresAt: c.ExpiresAt.Time, Claims: c}, nil
}

func nonNegative(u metering.Usage) bool {
	return u.Requests >= 0 && u.InputTokens >= 0 && u.OutputTokens >= 0
}

// Revoke revokes jti durably, marks it revoked on this replica at once and
// cancels its requests in flight. Revoking twice succeeds. It returns
// [ErrNotFound] for a jti never minted here (or pruned).
func (g *Gateway) Revoke(ctx context.Context, jti string) error {
	rev, err := g.store.RevokeToken(ctx, jti, g.now().UTC())
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return ErrNotFound
		}
		return fmt.Errorf("gateway: revoke token: %w", err)
	}
	cut := g.apply(rev)
	g.metrics.revoked.Inc()
	g.log.InfoContext(ctx, "gateway token revoked", "jti", jti, "cancelled_requests", cut)
	return nil
}

// RevokeRun revokes every unexpired token minted for run_id run with that
// tenant and agent (see Revoke) and returns how many. The signer's glue
// calls it when the run closes, so that a process of a closed run cannot
// go on calling the model outside any run's record.
func (g *Gateway) RevokeRun(ctx context.Context, tenant, agent, run string) (int, error) {
	jtis, err := g.store.RunTokens(ctx, tenant, agent, run, g.now().Add(-g.leeway))
	if err != nil {
		return 0, fmt.Errorf("gateway: tokens of run %s: %w", run, err)
	}
	n := 0
	for _, jti := range jtis {
		if err := g.Revoke(ctx, jti); err != nil && !errors.Is(err, ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// apply marks a revocation in the in-memory set and cancels the token's
// requests in flight; it returns how many it cancelled.
func (g *Gateway) apply(rev Revocation) int {
	g.revoked.add(rev.JTI, rev.ExpiresAt.Add(g.leeway))
	return g.inflight.cancel(rev.JTI)
}

// proxyLogWriter receives httputil.ReverseProxy's own log lines, whose
// text may name the upstream, and logs a fixed message instead.
type proxyLogWriter struct{ g *Gateway }

func (w proxyLogWriter) Write(p []byte) (int, error) {
	w.g.log.Debug("proxy body copy ended early")
	return len(p), nil
}
