package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentcustody/custody/internal/egress"
	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/mcpproxy"
	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/signer"
)

// ServeConfig configures `custody serve`. Every field is a flag and may
// also be set with CUSTODY_<FLAG_NAME>.
type ServeConfig struct {
	// Listen is the API listener: identity exchange, memory, MCP, health.
	// Sandboxes reach it. Default ":8865".
	Listen string
	// AdminListen is the operator listener (key revocation). It starts
	// only with AdminTokenFile set and must never be reachable from
	// sandboxes. Default "127.0.0.1:8867".
	AdminListen string
	// AdminTokenFile holds the bearer token operators present on the admin
	// listener (compared in constant time). Empty disables the listener.
	AdminTokenFile string
	// GatewayListen is the model gateway's data port: /{provider}/...
	// Sandboxes reach it. Default ":8866"; empty disables the gateway.
	GatewayListen string
	// GatewayKeysDir holds one file per provider with its real API key
	// (a mounted Secret), re-read when it changes. Empty: no keys (502).
	GatewayKeysDir string
	// GatewaySigningKey is the Ed25519 PKCS#8 PEM file gateway tokens are
	// signed with, created (0600) if missing. Default
	// <data-dir>/gateway-ed25519.pem.
	GatewaySigningKey string
	// GatewayProviders adds or overrides providers as NAME=URL or
	// NAME=KIND:URL (KIND anthropic, openai, gemini, http or github;
	// default: the built-in provider's kind, else openai). A provider of
	// kind http needs GatewayProviderAuth and at least one
	// GatewayAllowPaths rule; for kind github URL is the REST API (see
	// GatewayProviderGitURL for git).
	GatewayProviders []string
	// GatewayProviderAuth says where a kind-http provider's real
	// credential goes, as NAME=header:HEADER[:PREFIX] (in HEADER after
	// PREFIX; a PREFIX ending in a letter or digit gets a space, so
	// "Bearer" means "Bearer ") or NAME=basic:USERNAME (HTTP Basic auth,
	// the credential as password), e.g. "acme=header:Authorization:Bearer",
	// "acme=header:X-API-Key".
	GatewayProviderAuth []string
	// GatewayProviderGitURL sets a kind-github provider's git smart HTTP
	// upstream as NAME=URL. Default https://github.com for the built-in
	// "github" and for other kind-github providers.
	GatewayProviderGitURL []string
	// GatewayAllowPaths add endpoints to a provider's path allow-list as
	// NAME=[METHOD ]PATH (see gateway.DefaultAllowPaths for the rule
	// syntax and the defaults), e.g. "openai=POST /v1/audio/speech".
	GatewayAllowPaths []string
	// GatewayProviderTools names the providers (of kind anthropic, openai
	// or gemini) whose requests may have the provider itself connect out
	// for the caller: its web fetch, web search and MCP tools, content
	// given by URL (gateway.ProviderConfig.ProviderTools). Default none:
	// such requests are refused with 403.
	GatewayProviderTools []string
	// GatewayClockLeeway is the clock skew allowed on gateway tokens' exp
	// and nbf between the replica that minted a token and the one that
	// checks it: at most 5m, 0 for none. Default 5s. A larger value admits
	// replicas whose clocks lag further, but keeps every token usable that
	// much past its exp.
	GatewayClockLeeway time.Duration
	// GatewayBudgets is a JSON file of the operator's budgets: per tenant
	// per day or month, and caps on every run and token (see
	// metering.Policy). Empty: only the budgets tokens are minted with.
	GatewayBudgets string
	// GatewayDefaultMaxOutput is the output, in tokens, reserved for (and
	// set as the maximum of) a request that declares none while an
	// output limit applies. Default 4096.
	GatewayDefaultMaxOutput int64
	// GatewayRevocationMaxStaleness bounds the age of a replica's view of
	// gateway revocations (time since its last successful poll of the
	// store, every second); past it the gateway refuses every request
	// with 503 and cuts its streams until the store answers again.
	// Between 2s and 1h. Default 5s.
	GatewayRevocationMaxStaleness time.Duration
	// AdminServiceAccounts are service accounts ("NS:NAME") whose
	// projected token, with audience AdminAudience and checked by
	// TokenReview, is accepted on the admin listener besides the static
	// admin token.
	AdminServiceAccounts []string
	// AdminAudience is the audience admin callers' tokens must carry.
	// Default "custody-admin".
	AdminAudience string
	// Signer enables the signer (/v1/signer/ on the API listener, its
	// admin routes on the admin listener). Default true.
	Signer bool
	// SignerOrigin is the log's origin (checkpoint first line). Default
	// "custody.local/log".
	SignerOrigin string
	// SignerKeyFile is the log's Ed25519 signing key, created (0600) if
	// missing. Default <data-dir>/signer-ed25519.pem.
	SignerKeyFile string
	// PolicyDir holds one policy per tenant, <dir>/<tenant>.yaml.
	// Empty: built-in rules only, and calls no rule matches are denied.
	PolicyDir string
	// PolicyResolve makes the signer resolve host names in call arguments
	// and deny when any address is internal (DNS rebinding, in-cluster
	// service.namespace names). Default false.
	PolicyResolve bool
	// SignerIdle closes a run with no calls for this long (idle_s).
	// Default 1h.
	SignerIdle time.Duration
	// SignerMaxOpenRuns is how many open runs one agent may hold
	// (signer.Options.MaxOpenRuns); more are refused with 429.
	SignerMaxOpenRuns int
	// ApprovalTTL is how long an approval can be approved and consumed
	// after it was requested. Default 1h; 1s to 168h.
	ApprovalTTL time.Duration
	// Witnesses are "VKEY@URL" (the witness's C2SP vkey and submission
	// URL); WitnessQuorum is how many cosignatures trust.json requires
	// (default: all of them).
	Witnesses []string
	// WitnessCAFile is a PEM CA bundle trusted for https witness URLs
	// instead of the system roots. Empty: the system roots.
	WitnessCAFile string
	WitnessQuorum int
	// MetricsListen serves Prometheus /metrics, /healthz and /readyz.
	// Default ":8868"; empty disables it.
	MetricsListen string
	// DataDir holds the embedded SQLite database (unless DatabaseURL is
	// set) and the key files created by default. Default "custody-data".
	DataDir string
	// DatabaseURL selects PostgreSQL for several replicas: a pgx/libpq
	// connection URL. Empty uses SQLite in DataDir. It may carry a
	// password: give it as CUSTODY_DATABASE_URL from a Secret, not as a
	// flag other processes can read.
	DatabaseURL string

	// KubernetesAuth enables POST /v1/auth/kubernetes. Default true.
	KubernetesAuth bool
	// Kubeconfig is the kubeconfig file; empty uses $KUBECONFIG, then the
	// in-cluster service account.
	Kubeconfig string
	// KubernetesAudience is the audience projected tokens must carry.
	// Default "custody".
	KubernetesAudience string
	// KubernetesKeyTTL is the lifetime of an exchanged key. Default 15m.
	KubernetesKeyTTL time.Duration
	// KubernetesNamespaces are the tenant namespaces served: tokens from
	// other namespaces are refused, and /readyz verifies the owner-lookup
	// Role in each. Empty serves any namespace custody's RBAC covers.
	KubernetesNamespaces []string
	// KubernetesIssuers are the API server's service-account token
	// issuers (its --service-account-issuer values): a token with another
	// "iss" is refused before any TokenReview. Empty accepts any issuer.
	KubernetesIssuers []string
	// KubernetesQPS and KubernetesBurst are the API client's rate limits.
	// Defaults 200 and 400 (client-go's own are 5 and 10). They apply to
	// the built-in client (three calls per exchange: TokenReview, pod,
	// service account) and, separately, to the one reading Sandboxes and
	// SandboxClaims (two calls): the defaults sustain about 66 exchanges
	// per second after a burst of about 133.
	KubernetesQPS   float64
	KubernetesBurst int
	// ExchangeConcurrency bounds exchanges in flight; ExchangeQueueTimeout
	// is how long one waits for a slot before a 503. Defaults 64 and 2s.
	ExchangeConcurrency  int
	ExchangeQueueTimeout time.Duration
	// ExchangePodRate bounds the keys one pod incarnation may obtain, per
	// minute, after a burst of 20; over it an exchange gets 429
	// rate_limited with Retry-After. Default 60; 0 disables.
	ExchangePodRate float64
	// ExchangeAddressRate bounds exchanges per second from one client IP
	// address, after a burst of five seconds' worth, before the token is
	// checked: exchanges are unauthenticated, and each plausible token
	// costs a TokenReview. Default 50 (burst 250): a node's 110 pods
	// (kubelet's default max-pods) exchanging at once behind one SNAT
	// address, twice each, stay under it, while a flood from one address
	// reaches TokenReview 250 + 50/s times (measured: 750 of 10,000
	// attempts over 10 s; TestExchangeAddressLimitDefault). Behind a proxy
	// that hides client addresses every caller is one address: raise it.
	// 0 disables.
	ExchangeAddressRate float64

	// StaticTokensFile enables POST /v1/auth/static with this file (see
	// package staticauth). Empty disables the static method.
	StaticTokensFile string
	// KeyCacheTTL is how long a replica reuses a key verification.
	// Default 30s; 0 disables the cache.
	KeyCacheTTL time.Duration

	// ReadTimeout bounds reading one whole request, body included, on
	// every listener (streamed responses are not limited). Default 60s.
	ReadTimeout time.Duration

	// EgressListen is the egress proxy's listener (package egress; see
	// --egress-listen). Empty (the default) disables it.
	EgressListen string
	// EgressMaxConnsPerSource caps the egress listener's open connections
	// per source address; see
	// egress.LimitBySource. Default 128; raise it behind SNAT.
	EgressMaxConnsPerSource int

	// MCPUpstreams is the MCP proxy's upstreams file (package mcpproxy,
	// YAML or JSON); it serves /mcp/servers/{name} on the API listener.
	// Empty (the default) disables the proxy. Needs the signer.
	MCPUpstreams string

	// TLSCertFile and TLSKeyFile are the PEM serving certificate (leaf
	// first, then intermediates) and its private key, served on every
	// listener not named in Plaintext and read again every
	// TLSReloadInterval (package tlsfile: a rotated Secret is picked up
	// without a restart). Both or neither.
	TLSCertFile, TLSKeyFile string
	// TLSReloadInterval is how often the certificate files are re-read.
	// Default 10s; between 1s and 1h.
	TLSReloadInterval time.Duration
	// Plaintext names the listeners served as plain HTTP, from api,
	// gateway, admin, metrics and egress, or "all". Every other enabled
	// listener needs TLSCertFile: custody serves cleartext only where an
	// operator asked for it.
	Plaintext []string
	// AdminClientCAFile is a PEM bundle of CA certificates: a client
	// certificate it verifies is an admin credential on the admin
	// listener (mutual TLS), besides the bearer token and service
	// accounts. With neither of those configured, the admin handshake
	// requires one. Use a CA that issues only operator certificates.
	AdminClientCAFile string
	// ProxyApprovalWait bounds how long a call decided ask through the MCP
	// or egress proxy waits for an operator before it is refused. Default
	// 60s; 1s to 1h.
	ProxyApprovalWait time.Duration

	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// LogFormat is text or json. Default text.
	LogFormat string
}

// Defaults returns the default configuration.
func Defaults() ServeConfig {
	return ServeConfig{
		Listen:                  ":8865",
		AdminListen:             "127.0.0.1:8867",
		MetricsListen:           ":8868",
		GatewayListen:           ":8866",
		AdminAudience:           "custody-admin",
		Signer:                  true,
		SignerOrigin:            "custody.local/log",
		SignerIdle:              time.Hour,
		SignerMaxOpenRuns:       64,
		ApprovalTTL:             time.Hour,
		WitnessQuorum:           -1,
		DataDir:                 "custody-data",
		KubernetesAuth:          true,
		KubernetesAudience:      "custody",
		KubernetesKeyTTL:        15 * time.Minute,
		KubernetesQPS:           200,
		KubernetesBurst:         400,
		ExchangeConcurrency:     64,
		ExchangePodRate:         60,
		ExchangeAddressRate:     50,
		ExchangeQueueTimeout:    2 * time.Second,
		KeyCacheTTL:             30 * time.Second,
		ReadTimeout:             60 * time.Second,
		ProxyApprovalWait:       mcpproxy.DefaultApprovalWait,
		EgressMaxConnsPerSource: egress.DefaultMaxConnsPerSource,
		TLSReloadInterval:       10 * time.Second,
		LogLevel:                "info",
		LogFormat:               "text",

		// The gateway's token and revocation checks.
		GatewayClockLeeway:            gateway.DefaultLeeway,
		GatewayRevocationMaxStaleness: 5 * time.Second,
		GatewayDefaultMaxOutput:       4096,
	}
}

// RegisterFlags binds c's fields to flags on fs; c's values are the
// defaults shown in --help.
func (c *ServeConfig) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "API listener (identity exchange, memory, MCP, /healthz, /readyz); sandboxes reach it")
	fs.StringVar(&c.EgressListen, "egress-listen", c.EgressListen, "HTTP forward proxy for the sandbox's own connections (plain HTTP and CONNECT, no interception), e.g. :8869: credentials RUN:KEY (HTTP_PROXY=http://RUN:KEY@custody:8869), each request a signer decision on tool Egress recorded in that run, internal and metadata addresses refused at dial time; needs --signer; empty disables it")
	fs.IntVar(&c.EgressMaxConnsPerSource, "egress-max-conns-per-source", c.EgressMaxConnsPerSource, "open connections to --egress-listen per source address; more are closed at accept, so one sandbox's unauthenticated or idle connections cannot fill the listener; raise it where sandboxes share an address (SNAT)")
	fs.StringVar(&c.MCPUpstreams, "mcp-upstreams", c.MCPUpstreams, "MCP proxy upstreams file (YAML or JSON: name, url, tenants, credential file, tool globs), served at /mcp/servers/{name} on --listen: each tools/call a signer decision on tool mcp__{name}__{tool} before it is forwarded; needs --signer; empty disables it")
	fs.DurationVar(&c.ProxyApprovalWait, "proxy-approval-wait", c.ProxyApprovalWait, "how long a call decided ask through the MCP or egress proxy waits for an operator's approval (the approval flow) before it is refused (1s to 1h)")
	fs.StringVar(&c.AdminListen, "admin-listen", c.AdminListen, "operator listener (key revocation, gateway tokens, signer approvals/bundles/trust); started only with --admin-token-file, --admin-service-accounts or --admin-client-ca-file; never expose to sandboxes")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "PEM serving certificate (leaf first, then intermediates) for every listener not in --plaintext; re-read every --tls-reload-interval, so a rotated Secret needs no restart")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "PEM private key of --tls-cert-file")
	fs.DurationVar(&c.TLSReloadInterval, "tls-reload-interval", c.TLSReloadInterval, "how often the certificate, key and client CA files are re-read (1s to 1h); a pair that does not load is logged and the previous one kept")
	fs.StringSliceVar(&c.Plaintext, "plaintext", c.Plaintext, "listeners served as plain HTTP (api, gateway, admin, metrics, egress, or all): only where a mesh or the loopback interface protects the traffic; every other listener needs --tls-cert-file")
	fs.StringVar(&c.AdminClientCAFile, "admin-client-ca-file", c.AdminClientCAFile, "PEM CA bundle: client certificates it verifies are admin credentials (mutual TLS) on --admin-listen; alone, the admin listener requires one")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", c.AdminTokenFile, "file holding the admin bearer token; empty disables the admin listener")
	fs.StringVar(&c.GatewayListen, "gateway-listen", c.GatewayListen, "model gateway data port (/{provider}/...); sandboxes reach it; empty disables the gateway")
	fs.StringVar(&c.GatewayKeysDir, "gateway-keys-dir", c.GatewayKeysDir, "directory with one file per provider (anthropic, openai, gemini, ...) holding its real API key; re-read on change")
	fs.StringVar(&c.GatewaySigningKey, "gateway-signing-key", c.GatewaySigningKey, "Ed25519 PKCS#8 PEM file for gateway tokens, created if missing (default <data-dir>/gateway-ed25519.pem)")
	fs.StringSliceVar(&c.GatewayProviders, "gateway-provider", c.GatewayProviders, "add or override a provider: NAME=URL or NAME=KIND:URL, KIND anthropic|openai|gemini|http|github (repeatable); kind http forwards only its --gateway-allow-path rules and needs --gateway-provider-auth; kind github's URL is its REST API (built in: github=github:https://api.github.com)")
	fs.StringSliceVar(&c.GatewayProviderAuth, "gateway-provider-auth", c.GatewayProviderAuth, "where a kind-http provider's real credential (its file in --gateway-keys-dir) goes: NAME=header:HEADER[:PREFIX] (PREFIX ending in a letter gets a space: 'acme=header:Authorization:Bearer', 'acme=header:X-API-Key') or NAME=basic:USERNAME (HTTP Basic, the credential as password) (repeatable)")
	fs.StringSliceVar(&c.GatewayProviderGitURL, "gateway-provider-git-url", c.GatewayProviderGitURL, "a kind-github provider's git smart HTTP upstream: NAME=URL (default github=https://github.com) (repeatable)")
	fs.StringSliceVar(&c.GatewayAllowPaths, "gateway-allow-path", c.GatewayAllowPaths, "let a provider forward one more endpoint: NAME=[METHOD ]PATH, * one path segment, ** (last) the rest, e.g. 'openai=POST /v1/audio/speech' (repeatable); by default only the SDKs' inference endpoints are forwarded")
	fs.StringSliceVar(&c.GatewayProviderTools, "gateway-provider-tools", c.GatewayProviderTools, "let a provider of kind anthropic, openai or gemini run tools that connect out for the sandbox (web fetch, web search, MCP servers, content by URL): NAME (repeatable); by default they are refused with 403, since the egress policy decides and records none of those connections")
	fs.DurationVar(&c.GatewayClockLeeway, "gateway-clock-leeway", c.GatewayClockLeeway, "clock skew allowed on gateway tokens' exp and nbf between the minting replica and this one (0 to 5m; 0: none); larger admits laggier clocks but keeps every token usable that much past its exp")
	fs.StringVar(&c.GatewayBudgets, "gateway-budgets", c.GatewayBudgets, `JSON file of budgets: {"tenants":{"NS":{"period":"day|month","requests":N,"input_tokens":N,"output_tokens":N}},"default_tenant":{...},"run":{...},"token":{...}}; checked before each request is forwarded, across replicas; 402 "budget exceeded"`)
	fs.Int64Var(&c.GatewayDefaultMaxOutput, "gateway-default-max-output-tokens", c.GatewayDefaultMaxOutput, "output tokens reserved for, and set as the maximum of, a request that declares no max_tokens while an output budget applies")
	fs.DurationVar(&c.GatewayRevocationMaxStaleness, "gateway-revocation-max-staleness", c.GatewayRevocationMaxStaleness, "longest time without a successful revocation poll of the store (every 1s) before the gateway fails closed: 503 'gateway revocation view is stale' and streams cut until the store answers (2s to 1h); shorter honours other replicas' revocations sooner in an outage, longer rides out database blips")
	fs.StringSliceVar(&c.AdminServiceAccounts, "admin-service-accounts", c.AdminServiceAccounts, "service accounts (NS:NAME) whose projected token (audience --admin-audience, checked by TokenReview) is accepted on the admin listener")
	fs.StringVar(&c.AdminAudience, "admin-audience", c.AdminAudience, "audience admin callers' projected tokens must carry")
	fs.BoolVar(&c.Signer, "signer", c.Signer, "serve the signer: /v1/signer/ on --listen, its admin routes (approvals, bundles, trust) on --admin-listen")
	fs.StringVar(&c.SignerOrigin, "signer-origin", c.SignerOrigin, "the signer log's origin (first line of its checkpoints)")
	fs.StringVar(&c.SignerKeyFile, "signer-key-file", c.SignerKeyFile, "the log's Ed25519 signing key, created if missing (default <data-dir>/signer-ed25519.pem); with --database-url required and never created (custody keys init)")
	fs.StringVar(&c.PolicyDir, "policy-dir", c.PolicyDir, "directory of per-tenant policies, <tenant>.yaml; empty: built-in rules only, unmatched calls denied")
	fs.BoolVar(&c.PolicyResolve, "policy-resolve", c.PolicyResolve, "resolve host names in tool-call arguments and deny when any address is internal")
	fs.DurationVar(&c.SignerIdle, "signer-idle", c.SignerIdle, "close a run after this long without calls (idle_s), with a signed run.closing of reason idle_timeout")
	fs.IntVar(&c.SignerMaxOpenRuns, "signer-max-open-runs", c.SignerMaxOpenRuns, "open runs one agent may hold at once; registering another is refused (429 too_many_runs) until one closes or idles out")
	fs.DurationVar(&c.ApprovalTTL, "approval-ttl", c.ApprovalTTL, "how long a signer approval can be approved and consumed after it was requested (1s to 168h); a pending one pauses its run's idle clock")
	fs.StringSliceVar(&c.Witnesses, "witness", c.Witnesses, "a witness as VKEY@URL (C2SP vkey and tlog-witness URL), repeatable")
	fs.StringVar(&c.WitnessCAFile, "witness-ca-file", c.WitnessCAFile, "PEM CA bundle trusted for https --witness URLs instead of the system roots")
	fs.IntVar(&c.WitnessQuorum, "witness-quorum", c.WitnessQuorum, "witness cosignatures trust.json requires (-1: all configured witnesses)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "listener for Prometheus /metrics, /healthz and /readyz; empty disables it")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the embedded SQLite database and default key files (created 0700)")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL connection URL for several replicas (prefer CUSTODY_DATABASE_URL: a flag shows in the process list); empty uses SQLite in --data-dir")
	fs.BoolVar(&c.KubernetesAuth, "kubernetes-auth", c.KubernetesAuth, "serve POST /v1/auth/kubernetes (needs Kubernetes credentials)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig file; empty uses $KUBECONFIG, then in-cluster config")
	fs.StringVar(&c.KubernetesAudience, "kubernetes-audience", c.KubernetesAudience, "audience that projected service-account tokens must carry")
	fs.DurationVar(&c.KubernetesKeyTTL, "kubernetes-key-ttl", c.KubernetesKeyTTL, "lifetime of a key minted by an exchange")
	fs.StringSliceVar(&c.KubernetesNamespaces, "kubernetes-namespaces", c.KubernetesNamespaces, "tenant namespaces served (comma-separated): tokens from other namespaces are refused and /readyz checks the owner-lookup Role in each; empty serves any namespace custody's RBAC covers")
	fs.StringSliceVar(&c.KubernetesIssuers, "kubernetes-issuers", c.KubernetesIssuers, "service-account token issuers the API server accepts (its --service-account-issuer values, comma-separated): tokens with another iss are refused before any TokenReview; empty accepts any")
	fs.Float64Var(&c.KubernetesQPS, "kubernetes-qps", c.KubernetesQPS, "Kubernetes API client queries per second")
	fs.IntVar(&c.KubernetesBurst, "kubernetes-burst", c.KubernetesBurst, "Kubernetes API client burst")
	fs.IntVar(&c.ExchangeConcurrency, "exchange-concurrency", c.ExchangeConcurrency, "exchanges talking to the API server at once")
	fs.Float64Var(&c.ExchangePodRate, "exchange-pod-rate", c.ExchangePodRate, "keys one pod may obtain per minute after a burst of 20 (0: no limit); over it 429 rate_limited")
	fs.Float64Var(&c.ExchangeAddressRate, "exchange-address-rate", c.ExchangeAddressRate, "exchanges per second from one client IP (an IPv6 client: its /64) after a burst of 5 s worth, checked before the token (0: no limit); the default lets a node's 110 pods behind one SNAT address exchange twice each at once while a flood from one address reaches TokenReview 250 + 50/s times (750 of 10,000 attempts in 10 s); raise it behind a proxy that hides client addresses")
	fs.DurationVar(&c.ExchangeQueueTimeout, "exchange-queue-timeout", c.ExchangeQueueTimeout, "how long an exchange waits for a slot before 503 with Retry-After")
	fs.StringVar(&c.StaticTokensFile, "static-tokens-file", c.StaticTokensFile, "YAML file of token SHA-256 -> tenant/agent/session; enables POST /v1/auth/static")
	fs.DurationVar(&c.KeyCacheTTL, "key-cache-ttl", c.KeyCacheTTL, "how long this replica reuses a key verification (0 disables)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "longest time to read one whole request, body included, on every listener (streamed responses are not limited)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	markEnvNonEmpty(fs, "database-url", "kubernetes-namespaces", "kubernetes-issuers")
}

// Validate reports the first invalid setting.
func (c *ServeConfig) Validate() error {
	var errs []error
	for name, addr := range map[string]string{"--listen": c.Listen, "--admin-listen": c.AdminListen, "--metrics-listen": c.MetricsListen, "--gateway-listen": c.GatewayListen} {
		if addr == "" && (name == "--listen" || name == "--admin-listen") {
			errs = append(errs, fmt.Errorf("%s is required", name))
			continue
		}
		if addr != "" {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				errs = append(errs, fmt.Errorf("%s %q: %w", name, addr, err))
			}
		}
	}
	if _, err := c.providers(); err != nil {
		errs = append(errs, err)
	}
	for _, sa := range c.AdminServiceAccounts {
		if ns, name, ok := strings.Cut(sa, ":"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Errorf("--admin-service-accounts %q: want NS:NAME", sa))
		}
	}
	if len(c.AdminServiceAccounts) > 0 && !c.KubernetesAuth {
		errs = append(errs, errors.New("--admin-service-accounts needs --kubernetes-auth (TokenReview)"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir is required"))
	}
	if c.DatabaseURL != "" {
		// Replicas share the database, so they must share the keys that
		// sign what it holds: a key created per replica would split the
		// log's signatures and make each replica's gateway tokens
		// unverifiable on the others.
		if c.Signer && c.SignerKeyFile == "" {
			errs = append(errs, errors.New("--database-url needs --signer-key-file: one log key shared by every replica (e.g. from a Secret)"))
		}
		if c.GatewayListen != "" && c.GatewaySigningKey == "" {
			errs = append(errs, errors.New("--database-url needs --gateway-signing-key: one token key shared by every replica (e.g. from a Secret)"))
		}
	}
	if !c.KubernetesAuth && c.StaticTokensFile == "" {
		errs = append(errs, errors.New("no auth method: enable --kubernetes-auth or set --static-tokens-file"))
	}
	if c.EgressMaxConnsPerSource < 1 {
		errs = append(errs, errors.New("--egress-max-conns-per-source must be positive"))
	}
	errs = append(errs, c.validateTLS()...)
	if c.EgressListen != "" && !c.Signer {
		errs = append(errs, errors.New("--egress-listen needs the signer (--signer): every egress request is a signer decision"))
	}
	if c.MCPUpstreams != "" && !c.Signer {
		errs = append(errs, errors.New("--mcp-upstreams needs the signer (--signer): every MCP proxy call is a signer decision"))
	} else if c.MCPUpstreams != "" {
		if _, err := mcpproxy.LoadConfig(c.MCPUpstreams); err != nil {
			errs = append(errs, fmt.Errorf("--mcp-upstreams: %w", err))
		}
	}
	if c.ProxyApprovalWait < time.Second || c.ProxyApprovalWait > time.Hour {
		errs = append(errs, fmt.Errorf("--proxy-approval-wait %v: must be between 1s and 1h", c.ProxyApprovalWait))
	}
	if c.KubernetesKeyTTL < time.Second || c.KubernetesKeyTTL > 24*time.Hour {
		errs = append(errs, fmt.Errorf("--kubernetes-key-ttl %v: must be between 1s and 24h", c.KubernetesKeyTTL))
	}
	if c.KubernetesAudience == "" {
		errs = append(errs, errors.New("--kubernetes-audience is required"))
	}
	if !(c.ExchangePodRate >= 0) || !(c.ExchangeAddressRate >= 0) || math.IsInf(c.ExchangePodRate, 0) || math.IsInf(c.ExchangeAddressRate, 0) {
		errs = append(errs, errors.New("--exchange-pod-rate and --exchange-address-rate must be finite numbers >= 0"))
	}
	if c.KubernetesQPS <= 0 || c.KubernetesBurst <= 0 || c.ExchangeConcurrency <= 0 || c.ExchangeQueueTimeout <= 0 {
		errs = append(errs, errors.New("--kubernetes-qps, --kubernetes-burst, --exchange-concurrency and --exchange-queue-timeout must be positive"))
	}
	if _, err := c.witnesses(); err != nil {
		errs = append(errs, err)
	}
	if c.SignerMaxOpenRuns <= 0 {
		errs = append(errs, fmt.Errorf("--signer-max-open-runs %d must be positive", c.SignerMaxOpenRuns))
	}
	if c.SignerIdle <= 0 {
		errs = append(errs, errors.New("--signer-idle must be positive"))
	}
	if c.ApprovalTTL < signer.MinApprovalTTL || c.ApprovalTTL > signer.MaxApprovalTTL {
		errs = append(errs, fmt.Errorf("--approval-ttl must be between %v and %v", signer.MinApprovalTTL, signer.MaxApprovalTTL))
	}
	if c.WitnessQuorum > len(c.Witnesses) {
		errs = append(errs, fmt.Errorf("--witness-quorum %d exceeds the %d witnesses configured", c.WitnessQuorum, len(c.Witnesses)))
	}
	if c.ReadTimeout <= 0 {
		errs = append(errs, errors.New("--read-timeout must be positive"))
	}
	if c.GatewayClockLeeway < 0 || c.GatewayClockLeeway > gateway.MaxLeeway {
		errs = append(errs, fmt.Errorf("--gateway-clock-leeway %v: must be between 0 and %v", c.GatewayClockLeeway, gateway.MaxLeeway))
	}
	if c.GatewayDefaultMaxOutput < 1 {
		errs = append(errs, fmt.Errorf("--gateway-default-max-output-tokens %d: must be at least 1", c.GatewayDefaultMaxOutput))
	}
	if c.GatewayBudgets != "" {
		if _, err := metering.LoadPolicy(c.GatewayBudgets); err != nil {
			errs = append(errs, fmt.Errorf("--gateway-budgets %s: %w", c.GatewayBudgets, err))
		}
	}
	if c.GatewayRevocationMaxStaleness < 2*time.Second || c.GatewayRevocationMaxStaleness > time.Hour {
		errs = append(errs, fmt.Errorf("--gateway-revocation-max-staleness %v: must be between 2s and 1h", c.GatewayRevocationMaxStaleness))
	}
	if c.KeyCacheTTL < 0 {
		errs = append(errs, errors.New("--key-cache-ttl must not be negative"))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// gatewayLeeway is GatewayClockLeeway as a [gateway.Options] Leeway,
// where zero means the default.
func (c *ServeConfig) gatewayLeeway() time.Duration {
	if c.GatewayClockLeeway == 0 {
		return gateway.NoLeeway
	}
	return c.GatewayClockLeeway
}

// providers parses GatewayProviders.
func (c *ServeConfig) providers() (map[string]gateway.ProviderConfig, error) {
	out := map[string]gateway.ProviderConfig{}
	for _, p := range c.GatewayProviders {
		name, rest, ok := strings.Cut(p, "=")
		if !ok || name == "" || rest == "" {
			return nil, fmt.Errorf("--gateway-provider %s: want NAME=URL or NAME=KIND:URL", urlForError(p))
		}
		var pc gateway.ProviderConfig
		if kind, u, ok := strings.Cut(rest, ":"); ok && isKind(kind) && (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) {
			pc.Kind, rest = kind, u
		}
		if u, err := url.Parse(rest); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--gateway-provider %s=%s: base URL must be http(s)://host[...]", name, urlForError(rest))
		}
		pc.BaseURL = rest
		out[name] = pc
	}
	for _, a := range c.GatewayAllowPaths {
		name, rule, ok := strings.Cut(a, "=")
		if !ok || name == "" || strings.TrimSpace(rule) == "" {
			return nil, fmt.Errorf("--gateway-allow-path %q: want NAME=[METHOD ]PATH", a)
		}
		pc := out[name]
		if _, builtin := gateway.DefaultProviders()[name]; !builtin && pc.BaseURL == "" {
			return nil, fmt.Errorf("--gateway-allow-path %q: no provider %s (add it with --gateway-provider)", a, name)
		}
		if err := gateway.CheckPathRule(rule); err != nil {
			return nil, fmt.Errorf("--gateway-allow-path %q: %w", a, err)
		}
		pc.AllowPaths = append(pc.AllowPaths, rule)
		out[name] = pc
	}
	for _, name := range c.GatewayProviderTools {
		pc := out[name]
		if _, builtin := gateway.DefaultProviders()[name]; !builtin && pc.BaseURL == "" {
			return nil, fmt.Errorf("--gateway-provider-tools %q: no provider %s (add it with --gateway-provider)", name, name)
		}
		if k := kindOf(name, pc); k != gateway.KindAnthropic && k != gateway.KindOpenAI && k != gateway.KindGemini {
			return nil, fmt.Errorf("--gateway-provider-tools %q: %s is of kind %s, which has no provider-run tools", name, name, k)
		}
		pc.ProviderTools = true
		out[name] = pc
	}
	if err := c.brokeredProviders(out); err != nil {
		return nil, err
	}
	return out, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// urlForError is raw as an error may quote it: without its user info
// (a token may be given as the user name alone), query and fragment
// (they may hold a key), each replaced by "...", or a placeholder if it
// does not parse.
func urlForError(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("...")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "...", false
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "...", ""
	}
	return u.String()
}
