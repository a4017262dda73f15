package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/providerreach"
)

// newTransport is the one upstream transport a gateway shares across all
// providers and requests. http.DefaultTransport keeps only 2 idle
// connections per host, which under load means a new TLS handshake for
// most requests.
func newTransport(proxy func(*http.Request) (*url.URL, error), responseHeaderTimeout time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 proxy, // nil: never from the environment unless configured
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		// Pass bodies through as the upstream sent them; the client asked
		// for its own encoding.
		DisableCompression: true,
	}
}

// credentialHeaders are the request headers that carry an API key in some
// SDK. All are stripped before proxying; a gateway token is read from each
// (from Authorization only in the Bearer scheme).
var credentialHeaders = [...]string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Api-Key"}

// credentialIndex is the index of header name k in credentialHeaders,
// ignoring letter case, or -1.
func credentialIndex(k string) int {
	for i, h := range credentialHeaders {
		if len(k) == len(h) && strings.EqualFold(k, h) {
			return i
		}
	}
	return -1
}

// queryKeyParam is the query parameter some Gemini clients put the key in.
const queryKeyParam = "key"

// mayHoldKeyParam reports whether the raw query q may hold a
// queryKeyParam parameter: its name as is or percent-encoded ("%6Bey",
// which url.ParseQuery and the provider decode to "key"). Only then is q
// parsed.
func mayHoldKeyParam(q string) bool {
	return strings.Contains(q, queryKeyParam) || strings.Contains(q, "%")
}

// extractToken returns the one gateway token in h and the raw query
// (and, if basic, the password of "Authorization: Basic"). It
// fails with [ErrMissingToken] if there is none and [ErrTokenConflict] if
// there are two different ones; the same token in several places is
// fine.
func extractToken(h http.Header, rawQuery string, basic bool) (string, error) {
	var tok string
	var conflict bool
	add := func(v string) {
		v = strings.TrimSpace(v)
		switch {
		case v == "":
		case tok == "":
			tok = v
		case tok != v:
			conflict = true
		}
	}
	for k, vs := range h {
		i := credentialIndex(k)
		if i < 0 {
			continue
		}
		for _, v := range vs {
			if i == 0 {
				scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
				switch {
				case ok && strings.EqualFold(scheme, "Bearer"):
					v = cred
				case ok && basic && strings.EqualFold(scheme, "Basic"):
					if v, ok = basicPassword(cred); !ok {
						continue
					}
				default:
					continue
				}
			}
			add(v)
		}
	}
	if mayHoldKeyParam(rawQuery) {
		q, _ := url.ParseQuery(rawQuery) // keeps the pairs it could parse
		for _, v := range q[queryKeyParam] {
			add(v)
		}
	}
	switch {
	case conflict:
		return "", ErrTokenConflict
	case tok == "":
		return "", ErrMissingToken
	}
	return tok, nil
}

// splitProvider splits "/{provider}/rest" into provider and "/rest".
func splitProvider(path string) (name, rest string) {
	p := strings.TrimPrefix(path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// hasDotSegment reports whether p has a "." or ".." segment.
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// requestPath splits the request path into the provider name and the
// path to forward (with its escaped form when that is not the default
// one). Dot segments are resolved first, as a server would, so that
// what the checks see (the provider, a Gemini model segment) is what the
// upstream serves.
func requestPath(u *url.URL) (name, rest, rawRest string) {
	p := u.Path
	if hasDotSegment(p) {
		trailing := strings.HasSuffix(p, "/")
		p = path.Clean("/" + p)
		if trailing && p != "/" {
			p += "/"
		}
		name, rest = splitProvider(p)
		return name, rest, "" // the escaped form no longer matches
	}
	name, rest = splitProvider(p)
	if u.RawPath != "" {
		if _, rr := splitProvider(u.RawPath); rr != "" {
			if un, err := url.PathUnescape(rr); err == nil && un == rest {
				rawRest = rr
			}
		}
	}
	return name, rest, rawRest
}

// shownName is a provider name safe to echo in a refusal.
func shownName(name string) string {
	if providerName.MatchString(name) {
		return name
	}
	s := url.PathEscape(name)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// modelName is the shape of a model name echoed as is in a refusal.
var modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}$`)

// shownModel is a requested model name safe to echo in a one-line
// refusal: "(none)" when there is none, escaped and truncated when it is
// not shaped like a model name.
func shownModel(m string) string {
	switch {
	case m == "":
		return "(none)"
	case modelName.MatchString(m):
		return m
	}
	s := url.PathEscape(m)
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

// adminPrefix is the admin plane's path prefix, never served on the data
// port.
const adminPrefix = "/v1/gateway"

// proxyState is what the handler hands the proxy callbacks for one
// request, in the request context.
type proxyState struct {
	provider *provider
	key      string
	jti      string
	rest     string // path after /{provider}, dot segments resolved
	rawRest  string // its escaped form, if it differs from the default
	git      bool   // KindGitHub: a git smart HTTP request (see classifyGitHub)
	outcome  string
	// dropUsage, if set, takes the usage-only chunks out of an event
	// stream (see responseBody.dropUsage).
	dropUsage func(data []byte)
}

type stateKey struct{}

func stateFrom(ctx context.Context) *proxyState {
	st, _ := ctx.Value(stateKey{}).(*proxyState)
	return st
}

// DataHandler serves the data plane: /{provider}/... proxied to the
// provider with the real key, after the checks listed in the package
// documentation. Every path under /v1/gateway/ answers 404.
func (g *Gateway) DataHandler() http.Handler { return http.HandlerFunc(g.serveData) }

func (g *Gateway) serveData(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodHead, http.MethodPut, http.MethodPatch:
	default:
		// TRACE would have the provider echo the injected key back;
		// CONNECT and OPTIONS have no use against a model API.
		g.metrics.request("", outcomeNotFound)
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE")
		writeText(w, http.StatusMethodNotAllowed, "method not allowed", "false")
		return
	}
	if r.URL.Path == adminPrefix || strings.HasPrefix(r.URL.Path, adminPrefix+"/") {
		g.metrics.request("", outcomeNotFound)
		writeText(w, http.StatusNotFound, "404 page not found", "false")
		return
	}
	name, rest, rawRest := requestPath(r.URL)
	p := g.providers[name]
	if p == nil {
		err := ErrUnknownProvider
		if name != "" {
			err = fmt.Errorf("%w %s", ErrUnknownProvider, shownName(name))
		}
		g.refuse(w, r, "", "", err)
		return
	}
	tok, err := extractToken(r.Header, r.URL.RawQuery, acceptsBasic(p.kind))
	if err != nil {
		g.refuse(w, r, name, "", err)
		return
	}
	claims, err := g.verifier.Verify(tok)
	if err == nil {
		err = g.checkMinted(r.Context(), claims)
	}
	if err != nil {
		g.refuse(w, r, name, "", err)
		return
	}
	jti := claims.ID
	// From here on, a request of a run's token is recorded in the run,
	// refusals included.
	rc := g.startRecording(claims, p, r, rest)
	var st *proxyState
	model := ""
	if rc != nil {
		w = rc.writer(w)
		defer func() {
			outcome := rc.refused
			if st != nil {
				outcome = st.outcome
			}
			rc.finish(r.Context(), outcome, model)
		}()
	}
	if !claims.AllowsProvider(name) {
		g.refuse(w, r, name, jti, fmt.Errorf("%w %s", ErrProviderScope, name))
		return
	}
	// Register before checking the revocation set: a revocation either
	// is in the set already or finds this request to cancel.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	e := g.inflight.add(jti, cancel)
	defer g.inflight.remove(jti, e)
	if g.stale() {
		g.refuse(w, r, name, jti, ErrRevocationStale)
		return
	}
	if g.revoked.has(jti) {
		g.refuse(w, r, name, jti, ErrRevoked)
		return
	}
	git, err := p.checkRoute(claims, r, rest)
	if err != nil {
		g.refuse(w, r, name, jti, err)
		return
	}
	if p.kind == KindHTTP {
		release, err := g.checkFormOverride(r, bodyHolder(claims))
		defer release() // on a refusal too: the body may be held
		if err != nil {
			g.refuse(w, r, name, jti, err)
			return
		}
	}
	hasBody := r.Body != nil && r.Body != http.NoBody
	checkTools := hasModels(p.kind) && !p.providerTools && hasBody
	needModel := len(claims.Models) > 0 && hasModels(p.kind)
	if needModel {
		// A list, a retrieval (models, a stored response) or a cancel
		// without a body runs no model: it needs none. A Gemini method
		// call (models/{m}:method) is judged by its path's model
		// whatever the HTTP method.
		runs := hasBody || r.Method != http.MethodGet && r.Method != http.MethodHead && !strings.HasSuffix(rest, "/cancel") ||
			p.kind == KindGemini && strings.Contains(path.Base(rest), ":")
		if where := modelElsewhere(r, p.kind, rest, runs); where != "" {
			g.refuse(w, r, name, jti, fmt.Errorf("%w named by %s (only the body's or path's model is checked)", ErrModelScope, where))
			return
		}
		needModel = runs
	}
	held := &heldBody{holder: bodyHolder(claims)}
	defer held.done()
	if checkTools || (needModel && p.kind != KindGemini) { // gemini's model is in the path
		if err := g.hold(held, r); err != nil {
			g.refuse(w, r, name, jti, err)
			return
		}
	}
	body := held.b
	if checkTools {
		if err := checkProviderTools(p, r, rest, body, hasBody); err != nil {
			g.refuse(w, r, name, jti, err)
			return
		}
	}
	if needModel {
		if p.kind == KindGemini {
			body = nil
		}
		if model = requestModel(p, r, rest, body); !claims.AllowsModel(model) {
			g.refuse(w, r, name, jti, fmt.Errorf("%w %s", ErrModelScope, shownModel(model)))
			return
		}
	}
	key := g.keys.get(name)
	if key == "" {
		g.refuse(w, r, name, jti, fmt.Errorf("%w %s", ErrNoProviderKey, name))
		return
	}
	if g.meter != nil {
		if model == "" && len(claims.Models) == 0 && p.kind == KindGemini {
			model = requestModel(p, r, rest, nil) // from the path
		}
		if err := g.beginMetering(ctx, cancel, r, claims, p, rest, model, rc, held); err != nil {
			g.refuse(w, r, name, jti, err)
			return
		}
	}
	// Upgrade (websocket, h2c) is never forwarded: drop it here so that
	// the proxy does not re-add it after removing hop-by-hop headers.
	if _, ok := r.Header["Upgrade"]; ok {
		r.Header = r.Header.Clone()
		r.Header.Del("Upgrade")
	}
	// Keep the request body readable after the response header is
	// written: an upstream may answer (and start a stream) before the
	// transport has sent the whole body. Without full duplex the HTTP/1
	// server consumes and closes the body at the first response write,
	// the transport's read of it fails and it closes the upstream
	// connection under the stream being copied (golang/go#40747).
	// Reading the body first would also work, but it needs a size bound
	// and holds every body in memory before the first byte goes out.
	// HTTP/2 is always full duplex (ErrNotSupported, ignored). In full
	// duplex the body must still be finished before this handler
	// returns: the server would otherwise consume it after it stopped
	// its background read of the connection and then read the
	// connection twice at once (a panic, the connection reset); closing
	// it here also makes a late read by the transport fail cleanly.
	_ = http.NewResponseController(w).EnableFullDuplex()
	defer r.Body.Close()
	if rc != nil {
		r.Body = rc.body(r.Body)
	}
	st = &proxyState{provider: p, key: key, jti: jti, rest: rest, rawRest: rawRest, git: git, outcome: outcomeProxied}
	if rc != nil && rc.meter.strip {
		st.dropUsage = rc.meter.onChunk
	}
	g.metrics.inflight.Inc()
	defer func() {
		g.metrics.inflight.Dec()
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrRevoked):
			st.outcome = outcomeRevoked
		case errors.Is(cause, ErrRevocationStale):
			st.outcome = outcomeStale
		case errors.Is(cause, metering.ErrBudgetExceeded):
			st.outcome = outcomeBudgetExceeded
		case errors.Is(cause, metering.ErrUnavailable):
			st.outcome = outcomeBudgetUnchecked
		}
		g.metrics.request(name, st.outcome)
	}()
	g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, stateKey{}, st)))
}

// refuse answers a refused request with its plain-text refusal.
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, provider, jti string, err error) {
	status, text := refusalFor(err)
	outcome := outcomeFor(err)
	g.metrics.request(provider, outcome)
	if rw, ok := w.(*recordingWriter); ok {
		rw.rc.refused = outcome
	}
	if provider == "" {
		provider = "unknown"
	}
	g.log.DebugContext(r.Context(), "gateway request refused", "provider", provider, "jti", jti, "status", status, "reason", text)
	if p := g.providers[provider]; p != nil && status == http.StatusUnauthorized && acceptsBasic(p.kind) {
		w.Header().Add("WWW-Authenticate", basicChallenge)
	}
	writeRefusal(w, err)
}

// retryAfterSeconds is the Retry-After of a 429 or 503 refusal: a
// condition the gateway expects to clear (a rate, a stale view).
const retryAfterSeconds = "1"

// writeRefusal writes the plain-text refusal for err (see [refusalFor]).
// A refusal that the same request cannot get past by retrying carries
// "x-should-retry: false", which the OpenAI and Anthropic SDKs honour
// over their status-based retries (they retry 401/403 never, but 404,
// 409, 429 and every 5xx, e.g. 502 "gateway holds no key"). A 429 or 503
// carries Retry-After and "x-should-retry: true". Upstream failures (502
// upstream unavailable, 504 upstream timeout) carry neither and are
// retried as the SDK sees fit.
func writeRefusal(w http.ResponseWriter, err error) {
	status, text := refusalFor(err)
	writeText(w, status, text, retryHint(w.Header(), status, err))
}

// retryHint is the x-should-retry value for a refusal of status for err
// ("" for none); for 429 and 503 it also sets Retry-After in h.
func retryHint(h http.Header, status int, err error) string {
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		h.Set("Retry-After", retryAfterSeconds)
		return "true"
	case errors.Is(err, ErrUpstream), errors.Is(err, ErrUpstreamTimeout):
		return ""
	}
	return "false"
}

// shouldRetryHeader tells the OpenAI and Anthropic SDKs whether to retry
// ("true" or "false"), overriding their choice by status code.
const shouldRetryHeader = "X-Should-Retry"

// writeText writes a one-line plain-text response with retry ("true",
// "false" or "" for none) as its x-should-retry (see [writeRefusal]).
func writeText(w http.ResponseWriter, status int, text, retry string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if retry != "" {
		h.Set(shouldRetryHeader, retry)
	}
	h.Del("Content-Length")
	if status == http.StatusUnauthorized {
		h.Add("WWW-Authenticate", `Bearer realm="custody-gateway"`)
	}
	w.WriteHeader(status)
	io.WriteString(w, text+"\n")
}

// maxModelBody bounds the request body read into memory to find the model
// when a token has a models allow-list (a larger body is refused with the
// model unknown) and to check it for provider-run tools (413). 32 MiB is
// Anthropic's own limit on a Messages request; several images in base64
// fit. (A flood of larger bodies would exhaust the process shared with the
// other services.)
const maxModelBody = 32 << 20

// requestModel is the model a request is for: the path segment
// models/{model}[:method] for gemini, the JSON body field "model" of
// body (r's, held by holdBody; nil if it was over the bound) otherwise,
// or "" if it cannot be determined.
func requestModel(p *provider, r *http.Request, rest string, body []byte) string {
	if p.kind == KindGemini {
		const seg = "/models/"
		i := strings.Index(rest, seg)
		if i < 0 || strings.Count(rest, seg) != 1 {
			return ""
		}
		m := rest[i+len(seg):]
		if j := strings.IndexByte(m, '/'); j >= 0 {
			m = m[:j]
		}
		m, _, _ = strings.Cut(m, ":")
		return m
	}
	if body == nil || contentEncoded(r.Header) || !providerreach.JSONContentType(r.Header.Get("Content-Type")) {
		return "" // a router may read a form's model (LiteLLM: any "form" type)
	}
	return bodyModel(body)
}

// rewrite builds the upstream request. It runs after the proxy removed
// the hop-by-hop headers, so a client's "Connection: x-api-key" cannot
// remove the key injected here.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	st := stateFrom(pr.In.Context())
	out := pr.Out
	for k := range out.Header {
		if credentialIndex(k) >= 0 || strings.EqualFold(k, "Proxy-Authorization") ||
			strings.EqualFold(k, "Upgrade") || strings.EqualFold(k, "Connection") || isMethodOverride(k) {
			delete(out.Header, k)
		}
	}
	out.URL.Path, out.URL.RawPath = st.rest, st.rawRest
	if q := out.URL.RawQuery; mayHoldKeyParam(q) || mayHoldMethodOverride(q) {
		v, err := url.ParseQuery(q)
		_, key := v[queryKeyParam]
		override := dropMethodOverrides(v)
		if key || override || err != nil {
			v.Del(queryKeyParam)
			out.URL.RawQuery = v.Encode()
		}
	}
	pr.SetURL(st.upstream())
	// Ask for the body as is: a content-coded one cannot be scrubbed
	// (see modifyResponse).
	out.Header.Set("Accept-Encoding", "identity")
	st.provider.inject(out.Header, st.key, st.git)
}

// modifyResponse drops every upstream response header that holds a
// secret of the provider, refuses a content-encoded body (see
// [errEncodedResponse]) and wraps every body in a [responseBody] that
// scrubs it and its trailers on the way back, streaming. The length
// changes where a secret is replaced, so Content-Length is dropped,
// except for a body of at most [maxWholeBody] bytes that is no event
// stream: it is scrubbed whole and declares its new length.
func (g *Gateway) modifyResponse(res *http.Response) error {
	st := stateFrom(res.Request.Context())
	if st == nil {
		return nil
	}
	secrets := g.secretsFor(st)
	scrubHeader(res.Header, secrets)
	gatewayLocation(res.Header, res.Request.URL, st.upstream(), st.provider.name)
	for k := range res.Trailer { // announced before the body: drop one named after a key
		if nameHasSecret(k, secrets) {
			delete(res.Trailer, k)
		}
	}
	if res.Body == nil || res.Body == http.NoBody {
		return nil
	}
	if contentEncoded(res.Header) {
		return errEncodedResponse
	}
	rb := &responseBody{src: res.Body, res: res, ctx: res.Request.Context(), secrets: secrets}
	if isEventStream(res.Header) {
		rb.endEvent = streamErrorEvent(st.provider.kind, st.rest)
		rb.dropUsage = st.dropUsage
	} else if res.ContentLength >= 0 && res.ContentLength <= maxWholeBody {
		rb.readSize = int(res.ContentLength) + 1 // the body and its EOF in one read
		b, err := io.ReadAll(rb)
		rb.Close()
		if err != nil {
			return err
		}
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
		res.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	res.Body = rb
	res.ContentLength = -1
	res.Header.Del("Content-Length")
	return nil
}

// gatewayLocation takes the URLs of an upstream response that point at
// the upstream itself back under /{provider}, the gateway path that
// reaches them: a redirect's Location (GitHub's 301 for a renamed
// repository) and the targets of a Link header (GitHub's pagination).
// The client never gets the upstream's URL and follows it through the
// gateway and its checks, not around it with the gateway token. A
// Location elsewhere on the upstream's host, outside its base path, is
// dropped, and so is a Link header with such a target; one to another
// host is kept.
func gatewayLocation(h http.Header, req, base *url.URL, provider string) {
	if locs := h["Location"]; len(locs) > 0 {
		var out []string
		for _, l := range locs {
			if v, ok := gatewayURL(l, req, base, provider); ok {
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			delete(h, "Location")
		} else {
			h["Location"] = out
		}
	}
	links := h["Link"]
	for i, l := range links {
		ok := true
		links[i] = linkTarget.ReplaceAllStringFunc(l, func(m string) string {
			v, keep := gatewayURL(m[1:len(m)-1], req, base, provider)
			ok = ok && keep
			return "<" + v + ">"
		})
		if !ok {
			delete(h, "Link")
			return
		}
	}
}

// linkTarget is a target of a Link header (RFC 8288): "<URI-reference>".
var linkTarget = regexp.MustCompile(`<[^<>]*>`)

// gatewayURL is l (relative to the upstream request req) as the client
// reaches it: under /{provider} if it is on the upstream's host (any port
// or scheme) under base's path, as is if on another host; false if it is
// on the upstream's host outside base's path, or not a URL.
func gatewayURL(l string, req, base *url.URL, provider string) (string, bool) {
	u, err := req.Parse(l)
	if err != nil {
		return "", false
	}
	if !strings.EqualFold(u.Hostname(), base.Hostname()) {
		return l, true
	}
	bp, p := strings.TrimSuffix(base.EscapedPath(), "/"), u.EscapedPath()
	if p != bp && !strings.HasPrefix(p, bp+"/") {
		return "", false
	}
	v := "/" + provider + strings.TrimPrefix(p, bp)
	if u.RawQuery != "" {
		v += "?" + u.RawQuery
	}
	if u.Fragment != "" {
		v += "#" + u.EscapedFragment()
	}
	return v, true
}

// proxyError answers a request whose upstream round trip failed, with
// fixed text that never holds the upstream URL or the error's text.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	st := stateFrom(ctx)
	provider, jti := "unknown", ""
	if st != nil {
		provider, jti = st.provider.name, st.jti
	}
	var out error
	outcome := outcomeUpstreamError
	switch {
	case errors.Is(context.Cause(ctx), ErrRevoked):
		out, outcome = ErrRevoked, outcomeRevoked
	case errors.Is(context.Cause(ctx), ErrRevocationStale):
		out, outcome = ErrRevocationStale, outcomeStale
	case ctx.Err() != nil:
		out, outcome = ErrUpstream, outcomeCancelled
	case errorCategory(err) == "timeout":
		out = ErrUpstreamTimeout
	default:
		out = ErrUpstream
	}
	if st != nil {
		st.outcome = outcome
	}
	if outcome == outcomeUpstreamError {
		g.log.WarnContext(ctx, "upstream request failed", "provider", provider, "jti", jti, "category", errorCategory(err))
	} else {
		g.log.DebugContext(ctx, "upstream request ended", "provider", provider, "jti", jti, "outcome", outcome)
	}
	writeRefusal(w, out)
}

// errorCategory is a bounded, secret-free description of an upstream
// error, for logs.
func errorCategory(err error) string {
	var (
		ne   net.Error
		dns  *net.DNSError
		op   *net.OpError
		cert *tls.CertificateVerificationError
		rec  tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, errEncodedResponse):
		return "encoding"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &dns):
		return "dns"
	case errors.As(err, &cert), errors.As(err, &rec):
		return "tls"
	case errors.As(err, &op) && op.Op == "dial":
		return "dial"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	}
	return "other"
}
