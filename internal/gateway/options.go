package gateway

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentcustody/custody/internal/metering"
)

// Kinds of provider API: how the real key is injected and where the model
// is found.
const (
	// KindAnthropic injects "x-api-key" and keeps "anthropic-version";
	// the model is the JSON body field "model".
	KindAnthropic = "anthropic"
	// KindOpenAI injects "Authorization: Bearer"; the model is the JSON
	// body field "model". Any OpenAI-compatible API is this kind.
	KindOpenAI = "openai"
	// KindGemini injects "x-goog-api-key"; the model is the path segment
	// models/{model}:....
	KindGemini = "gemini"
)

// ProviderConfig says where a provider is and how to talk to it.
type ProviderConfig struct {
	// BaseURL is the upstream the path after /{provider} is appended to,
	// e.g. "https://api.anthropic.com". Required except for the four
	// built-in providers, whose default is their public API (for "github",
	// the REST API; see GitURL).
	BaseURL string
	// Kind is KindAnthropic, KindOpenAI, KindGemini, KindHTTP or
	// KindGitHub. Defaults to the built-in provider's kind, or KindOpenAI
	// for other names.
	Kind string
	// AllowPaths are further endpoints the provider admits, as
	// "[METHOD ]PATH" rules (see [DefaultAllowPaths] for the syntax and
	// the defaults, which are always admitted), e.g. "POST
	// /v1/audio/speech". Any other path is refused with 403 "path not
	// allowed for provider <p>: <class>". A provider of [KindHTTP] has
	// no defaults and needs at least one; for [KindGitHub] they apply to
	// REST requests (see [githubAllowPaths] for the defaults).
	AllowPaths []string
	// GitURL is, for [KindGitHub], the git smart HTTP upstream the
	// /OWNER/NAME[.git]/... paths go to. Default [DefaultGitHubGitURL],
	// only with BaseURL [DefaultGitHubAPIURL]: a provider of another REST
	// API (GitHub Enterprise) needs its own, so that its credential never
	// goes to github.com.
	GitURL string
	// Auth says, for [KindHTTP] (required), where the real credential
	// goes. Nil for the other kinds.
	Auth *ProviderAuth
	// ProviderTools lets requests to a provider of kind anthropic, openai
	// or gemini have the provider connect out for the caller (its web
	// fetch, web search and MCP tools, content by URL); false, the
	// default, refuses them with [ErrProviderTool] (see
	// [ErrProviderTool]'s block). Such connections are decided by no
	// egress policy and recorded in no run.
	ProviderTools bool
}

// DefaultProviders are the built-in providers.
func DefaultProviders() map[string]ProviderConfig {
	return map[string]ProviderConfig{
		"anthropic": {BaseURL: "https://api.anthropic.com", Kind: KindAnthropic},
		"openai":    {BaseURL: "https://api.openai.com", Kind: KindOpenAI},
		"gemini":    {BaseURL: "https://generativelanguage.googleapis.com", Kind: KindGemini},
		"github":    {BaseURL: DefaultGitHubAPIURL, Kind: KindGitHub, GitURL: DefaultGitHubGitURL},
	}
}

// providerName is the shape of a provider name (a path segment and a file
// name in KeysDir).
var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Options configure a [Gateway]. The zero value of each field means its
// default.
type Options struct {
	// Store keeps token records and revocations. Required.
	Store Store
	// Providers are merged over [DefaultProviders]: an entry replaces the
	// built-in one of the same name (empty fields keep the built-in
	// values), other names add OpenAI-compatible (or other Kind)
	// providers. Names match [a-z0-9][a-z0-9_-]*.
	Providers map[string]ProviderConfig
	// KeysDir holds one file per provider, named after it ("anthropic",
	// "openai", "gemini", "github", ...), containing its real API key or
	// credential (surrounding
	// whitespace trimmed), e.g. a mounted Kubernetes Secret. Files are
	// checked for changes (mtime, size, inode) every PollInterval, so a key
	// rotates without a restart. Empty means no keys: every request that
	// passes the token checks is refused with 502.
	KeysDir string
	// Issuer is the iss claim minted and required. Default "custody".
	Issuer string
	// Audience is the aud claim minted and required. Default
	// "custody-gateway".
	Audience string
	// Leeway is the clock skew allowed on exp and nbf between the replica
	// that minted a token and this one. Zero means [DefaultLeeway] (5 s);
	// [NoLeeway] means none; other negative values and values over
	// [MaxLeeway] (5 min) are errors. A larger leeway admits replicas
	// whose clocks lag further, at the cost of every token (revoked or
	// not) staying usable that much past its exp.
	Leeway time.Duration
	// SigningKey is the Ed25519 key tokens are minted with (see
	// [LoadOrCreateSigningKey]); its public key is also accepted. This is
	// the default algorithm.
	SigningKey ed25519.PrivateKey
	// VerifyKeys are further Ed25519 public keys whose tokens are accepted,
	// e.g. the previous signing key during a rotation, or every key on a
	// replica that only verifies.
	VerifyKeys []ed25519.PublicKey
	// HMACSecret, if set, makes HS256 tokens with this secret (at least 32
	// bytes) acceptable, and is used to mint when SigningKey is nil.
	HMACSecret []byte
	// PollInterval is how often the store is polled for revocations made
	// by other replicas and the key files are checked. Default 1 s.
	PollInterval time.Duration
	// MaxStaleness bounds the age of this replica's view of revocations:
	// the time since the last successful poll of the store. Past it the
	// gateway fails closed: every request is refused with 503 "gateway
	// revocation view is stale" (with Retry-After) and every request in
	// flight, streams included, is cut, until a poll succeeds again.
	// Zero means 5 × PollInterval but at least 2 s (5 s by default); it
	// must be at least 2 × PollInterval. Shorter refuses sooner on a store outage (a
	// revocation made elsewhere is honoured sooner); longer rides out
	// brief database blips.
	MaxStaleness time.Duration
	// VerifyCacheSize bounds the cache of already verified tokens, and
	// the cache of jtis found minted in the Store. Default
	// 100000; negative disables it (every request checks a signature).
	VerifyCacheSize int
	// UpstreamProxy chooses an HTTP proxy for upstream requests. Nil (the
	// default) connects directly, ignoring HTTP_PROXY and friends; pass
	// http.ProxyFromEnvironment to honour them.
	UpstreamProxy func(*http.Request) (*url.URL, error)
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// headers (a non-streaming completion may take minutes). Default 10
	// minutes.
	ResponseHeaderTimeout time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Log receives one line per mint, revocation and key change, refusals
	// at Debug and upstream failures at Warn, with jti and provider but
	// never a key or a token. Default slog.Default().
	Log *slog.Logger
	// Metrics, if set, receives the gateway's collectors (labels: provider
	// from the configured set or "unknown", outcome from a fixed set).
	Metrics prometheus.Registerer
	// Recorder, if set, receives every request made with a token minted
	// for a run (see [Recorder]); nil records nothing.
	Recorder Recorder
	// Meter, if set, meters every request forwarded upstream and holds it
	// to its budgets (see the package doc's "Usage and budgets"); nil
	// meters nothing. The gateway does not close it.
	Meter *metering.Meter
}

func buildProviders(in map[string]ProviderConfig) (map[string]*provider, error) {
	cfgs := DefaultProviders()
	for name, c := range in {
		if !providerName.MatchString(name) {
			return nil, fmt.Errorf("gateway: provider name %q must match %s", name, providerName)
		}
		if d, ok := cfgs[name]; ok {
			if c.BaseURL == "" {
				c.BaseURL = d.BaseURL
			}
			if c.Kind == "" {
				c.Kind = d.Kind
			}
			if c.GitURL == "" && c.Kind == d.Kind && c.BaseURL == d.BaseURL {
				c.GitURL = d.GitURL
			}
		}
		if c.Kind == "" {
			c.Kind = KindOpenAI
		}
		cfgs[name] = c
	}
	out := make(map[string]*provider, len(cfgs))
	for name, c := range cfgs {
		switch c.Kind {
		case KindAnthropic, KindOpenAI, KindGemini, KindHTTP, KindGitHub:
		default:
			return nil, fmt.Errorf("gateway: provider %s: unknown kind %q", name, c.Kind)
		}
		u, err := parseUpstream(c.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("gateway: provider %s: BaseURL must be an http(s) URL with a host and no query", name)
		}
		allow, err := buildAllow(c.Kind, c.AllowPaths)
		if err != nil {
			return nil, fmt.Errorf("gateway: provider %s: %w", name, err)
		}
		p := &provider{name: name, kind: c.Kind, base: u, allow: allow, providerTools: c.ProviderTools}
		if err := buildBrokered(name, c, p); err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, nil
}
