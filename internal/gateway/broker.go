package gateway

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentcustody/custody/internal/secretform"
)

// Kinds of brokered (non-model) upstreams. Neither has models or usage:
// a token's models allow-list does not apply to them.
const (
	// KindHTTP is a declared HTTP API: the real credential goes where
	// [ProviderConfig.Auth] says, and only the paths in
	// [ProviderConfig.AllowPaths] are forwarded (there are no defaults).
	KindHTTP = "http"
	// KindGitHub is GitHub's REST API ([ProviderConfig.BaseURL], default
	// https://api.github.com, "Authorization: Bearer <credential>") and
	// git smart HTTP ([ProviderConfig.GitURL], default
	// https://github.com with the default REST API and required with any
	// other, HTTP Basic "x-access-token:<credential>"),
	// scoped by the token's repos (see [RepoGrant] and
	// [classifyGitHub]).
	KindGitHub = "github"
)

// Built-in GitHub upstreams.
const (
	DefaultGitHubAPIURL = "https://api.github.com"
	DefaultGitHubGitURL = "https://github.com"
)

// gitHubUser is the Basic-auth username GitHub takes with a token as the
// password.
const gitHubUser = "x-access-token"

// ProviderAuth says where a [KindHTTP] provider's real credential goes:
// in header Header, after Prefix (e.g. "Authorization" and "Bearer ", or
// "X-API-Key" and none), or, with BasicUser set, as the password of HTTP
// Basic auth with that username. Exactly one of Header and BasicUser is
// set.
type ProviderAuth struct {
	Header    string
	Prefix    string
	BasicUser string
}

// ParseProviderAuth parses the text form of a [ProviderAuth]:
//
//	header:HEADER[:PREFIX]   the credential in HEADER after PREFIX
//	basic:USERNAME           HTTP Basic auth, the credential as password
//
// PREFIX is taken as is, except that one ending in a letter or digit gets
// a space after it ("Bearer" is "Bearer "), as an auth scheme is always
// followed by one. For example "header:Authorization:Bearer",
// "header:X-API-Key", "basic:api".
func ParseProviderAuth(s string) (ProviderAuth, error) {
	var a ProviderAuth
	kind, rest, _ := strings.Cut(s, ":")
	switch kind {
	case "header":
		h, prefix, _ := strings.Cut(rest, ":")
		if prefix != "" {
			if c := prefix[len(prefix)-1]; c < 0x80 && (isAlnum(c)) {
				prefix += " "
			}
		}
		a.Header, a.Prefix = h, prefix
	case "basic":
		a.BasicUser = rest
	default:
		return ProviderAuth{}, fmt.Errorf("auth %q: want header:HEADER[:PREFIX] or basic:USERNAME", s)
	}
	if err := a.check(); err != nil {
		return ProviderAuth{}, err
	}
	return a, nil
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// reservedHeaders may not carry a credential: they frame the request or
// are removed on the way.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te",
	"Trailer", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Content-Type", "Content-Encoding",
	"Accept-Encoding", "Expect"}

// check returns why a is not usable.
func (a ProviderAuth) check() error {
	switch {
	case a.Header != "" && a.BasicUser != "":
		return errors.New("auth: a header or a basic username, not both")
	case a.BasicUser != "":
		if strings.ContainsAny(a.BasicUser, ":\r\n") || !printable(a.BasicUser) {
			return errors.New("auth: the basic username may not hold ':' or control characters")
		}
		return nil
	case a.Header == "":
		return errors.New("auth: a header (header:HEADER[:PREFIX]) or a basic username (basic:USERNAME) is required")
	}
	if !isToken(a.Header) {
		return fmt.Errorf("auth: %q is not a header name", a.Header)
	}
	for _, h := range reservedHeaders {
		if strings.EqualFold(h, a.Header) {
			return fmt.Errorf("auth: header %s cannot carry a credential", h)
		}
	}
	if !printable(a.Prefix) {
		return errors.New("auth: the prefix may not hold control characters")
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (a header name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// hasModels reports whether providers of kind take a model (a token's
// models allow-list applies to them).
func hasModels(kind string) bool { return kind != KindHTTP && kind != KindGitHub }

// acceptsBasic reports whether providers of kind also take the gateway
// token as the password of HTTP Basic auth (git and many tools only do
// Basic); its username is ignored.
func acceptsBasic(kind string) bool { return kind == KindHTTP || kind == KindGitHub }

// basicChallenge is the WWW-Authenticate challenge a 401 refusal of a
// provider that [acceptsBasic] carries besides the Bearer one, so that a
// client that only does Basic (git, through libcurl) sends its
// credentials.
const basicChallenge = `Basic realm="custody-gateway"`

// basicPassword returns the password of an HTTP Basic credentials value
// (the part after "Basic "), or false if it is not one.
func basicPassword(cred string) (string, bool) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	_, pw, ok := strings.Cut(string(b), ":")
	return pw, ok
}

// basicValue is the Authorization value of HTTP Basic auth.
func basicValue(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// buildBrokered checks and completes the settings of a provider of a
// brokered kind: a [KindHTTP] one needs an Auth and at least one allow
// path; a [KindGitHub] one gets its git upstream.
func buildBrokered(name string, c ProviderConfig, p *provider) error {
	switch c.Kind {
	case KindHTTP:
		if c.Auth == nil {
			return fmt.Errorf("gateway: provider %s: kind http needs Auth (where the credential goes)", name)
		}
		if err := c.Auth.check(); err != nil {
			return fmt.Errorf("gateway: provider %s: %w", name, err)
		}
		if len(c.AllowPaths) == 0 {
			return fmt.Errorf("gateway: provider %s: kind http forwards only declared paths, and none is declared (AllowPaths)", name)
		}
		p.auth = *c.Auth
	case KindGitHub:
		if c.Auth != nil {
			return fmt.Errorf("gateway: provider %s: kind github takes no Auth (its credential goes where GitHub wants it)", name)
		}
		gitURL := c.GitURL
		if gitURL == "" {
			// Another REST API (GitHub Enterprise) holds another server's
			// credential: github.com must not get it in Basic auth.
			if c.BaseURL != DefaultGitHubAPIURL {
				return fmt.Errorf("gateway: provider %s: kind github with a BaseURL other than %s needs its GitURL (the default, %s, would get its credential)", name, DefaultGitHubAPIURL, DefaultGitHubGitURL)
			}
			gitURL = DefaultGitHubGitURL
		}
		u, err := parseUpstream(gitURL)
		if err != nil {
			return fmt.Errorf("gateway: provider %s: GitURL must be an http(s) URL with a host and no query", name)
		}
		p.git = u
	default:
		if c.Auth != nil || c.GitURL != "" {
			return fmt.Errorf("gateway: provider %s: Auth and GitURL are for kinds http and github", name)
		}
	}
	return nil
}

// parseUpstream parses an upstream base URL: http(s), a host, no
// userinfo, query or fragment.
func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("not an http(s) URL with a host and no query")
	}
	return u, nil
}

// checkRoute applies the provider's endpoint checks to a request (after
// the token's): the path allow-list and, for [KindGitHub], the token's
// repos (see [provider.checkGitHub]). git reports a git smart HTTP
// request, to be sent to the git upstream.
func (p *provider) checkRoute(c *Claims, r *http.Request, rest string) (git bool, err error) {
	if p.kind == KindGitHub {
		route, err := p.checkGitHub(c, r.Method, rest, r.URL.RawQuery)
		return route.git, err
	}
	if !p.allowsPath(r.Method, rest) {
		return false, fmt.Errorf("%w %s: %s", ErrPathNotAllowed, p.name, pathClass(rest))
	}
	return false, nil
}

// classOf is the path class of a request to p, as a refusal and a
// recorded call name it: [pathClass] of rest, or for [KindGitHub] "git"
// or the REST endpoint's class (see [classifyGitHub]).
func (p *provider) classOf(r *http.Request, rest string) string {
	if p.kind == KindGitHub {
		return classifyGitHub(r.Method, rest, r.URL.RawQuery).class
	}
	return pathClass(rest)
}

// upstream is the base URL a request goes to.
func (st *proxyState) upstream() *url.URL {
	if st.git {
		return st.provider.git
	}
	return st.provider.base
}

// inject puts the real credential key in h, where provider p's API takes
// it; git says the request goes to a [KindGitHub] provider's git
// upstream.
func (p *provider) inject(h http.Header, key string, git bool) {
	switch p.kind {
	case KindAnthropic:
		h["X-Api-Key"] = []string{key}
	case KindOpenAI:
		h["Authorization"] = []string{"Bearer " + key}
	case KindGemini:
		h["X-Goog-Api-Key"] = []string{key}
	case KindGitHub:
		if git {
			h["Authorization"] = []string{basicValue(gitHubUser, key)}
		} else {
			h["Authorization"] = []string{"Bearer " + key}
		}
	case KindHTTP:
		if p.auth.BasicUser != "" {
			h["Authorization"] = []string{basicValue(p.auth.BasicUser, key)}
		} else {
			for k := range h {
				if strings.EqualFold(k, p.auth.Header) {
					delete(h, k)
				}
			}
			h[http.CanonicalHeaderKey(p.auth.Header)] = []string{p.auth.Prefix + key}
		}
	}
}

// secretForms are the forms of the real credential key that a response
// is scrubbed of: key itself and, where it is sent in HTTP Basic auth,
// the base64 credentials it is sent as, each in every encoding an echo of
// it may use (secretform.Forms: JSON-escaped, hex, percent-encoded,
// inside base64). The slices returned are shared: read-only.
func (p *provider) secretForms(key string) [][]byte {
	if key == "" {
		return nil
	}
	if m := p.forms.Load(); m != nil && m.key == key {
		return m.forms
	}
	sent := []string{key}
	switch {
	case p.kind == KindGitHub:
		sent = append(sent, strings.TrimPrefix(basicValue(gitHubUser, key), "Basic "))
	case p.kind == KindHTTP && p.auth.BasicUser != "":
		sent = append(sent, strings.TrimPrefix(basicValue(p.auth.BasicUser, key), "Basic "))
	}
	var out [][]byte
	for _, s := range sent {
		out = append(out, secretform.Forms(s)...)
	}
	p.forms.Store(&keyForms{key: key, forms: out})
	return out
}
