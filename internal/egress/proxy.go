package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/tcpfwd"
)

// Caller is who asks for a connection, as [Proxy.Authenticate] found it:
// the identity of the custody key in Proxy-Authorization and the run the
// request is recorded in.
type Caller struct {
	Identity apikey.Identity
	Run      string
	// Bind, if set, ties a request's context to the credential's life
	// (e.g. gateway.Gateway.Bind for a run's gateway token): when the
	// returned context ends, the request or tunnel is cut. release is
	// called when the request ends.
	Bind func(ctx context.Context) (bound context.Context, release func())
}

// Request is one destination to decide: a CONNECT tunnel (Method
// "CONNECT", no URL) or a plain-HTTP request (its method and absolute URL).
type Request struct {
	Method string
	Host   string // canonicalHost of what was asked, without the port
	Port   int
	// URL is a plain-HTTP request's absolute URL, without user
	// information, its host canonical, its path and query as sent: not
	// normalized ("/%61dmin" and "/./admin" reach /admin on most
	// servers), so a rule on a URL's path is weaker than one on Host.
	URL string
}

// Decision is the answer to a Request. CallID is the decision's id
// (given back to Complete).
type Decision struct {
	Allow   bool
	RuleIDs []string
	CallID  string
}

// Outcome is what became of an allowed request, for [Proxy.Complete]:
// one short word with what it concerns, at most 64 printable bytes:
//
//	connected:ADDR      the tunnel was opened to ADDR (ip:port actually dialled),
//	                    or a plain-HTTP request was sent to ADDR and no
//	                    response header came back
//	status:N:ADDR       a plain-HTTP request answered N from ADDR
//	refused:RULE        the dial-time check refused every address the name resolved to
//	unreachable         the destination could not be reached
type Outcome string

// ErrCaller marks a Decide error about the caller rather than the
// destination (a run that is not the caller's, a key revoked since
// Authenticate): the proxy answers 407 as for a failed Authenticate.
var ErrCaller = errors.New("egress: caller refused")

// Proxy is an HTTP forward proxy (plain-HTTP requests in absolute form,
// and CONNECT tunnels; no TLS interception). Each request is
// authenticated, decided, then dialled by Dialer, whose dial-time check
// has the last word on the address actually connected to.
//
// Answers (text/plain, one line, never a credential):
//   - 407 "proxy authentication required" with Proxy-Authenticate: Basic
//     realm="custody", when Authenticate fails or Decide's error wraps
//     [ErrCaller];
//   - 403 "destination refused: RULE,..." when Decide denies or the
//     dial-time check refuses the resolved address;
//   - 400 for a request that is neither CONNECT nor absolute-form HTTP;
//   - 429 "too many open connections" when the caller's agent has
//     MaxPerCaller requests and tunnels open;
//   - 502 when the destination cannot be reached; 503 when Decide fails
//     (custody cannot check, so it refuses) or Complete cannot record
//     a tunnel's outcome.
type Proxy struct {
	// Authenticate maps a request's Proxy-Authorization to a caller.
	// Required.
	Authenticate func(r *http.Request) (Caller, error)
	// Decide decides and records one destination. Required.
	Decide func(ctx context.Context, c Caller, req Request) (Decision, error)
	// Complete, if set, records the outcome of an allowed request, once,
	// when it is known (before a tunnel's bytes flow, after a plain
	// request's response header). Its error is logged; a tunnel whose
	// outcome it did not record is refused (503) before any byte flows.
	Complete func(ctx context.Context, c Caller, d Decision, o Outcome) error
	// Dialer dials allowed destinations. Default: a zero Dialer.
	Dialer *Dialer
	// Log gets one line per refusal. Default slog.Default().
	Log *slog.Logger
	// MaxTunnel bounds a CONNECT tunnel's life, and a plain-HTTP
	// request's (its response streamed included); it is closed then.
	// Zero means DefaultMaxTunnel.
	MaxTunnel time.Duration
	// MaxPerCaller bounds the requests and tunnels one agent (tenant and
	// agent of the Caller) has open at once, so that one sandbox cannot
	// hold the listener's connections for all: over it the proxy answers
	// 429 "too many open connections". Zero means DefaultMaxPerCaller.
	MaxPerCaller int

	mu   sync.Mutex
	open map[string]int // open requests and tunnels per agent
}

// DefaultMaxPerCaller is Proxy.MaxPerCaller's default.
const DefaultMaxPerCaller = 64

// acquire counts an open request of c's agent, or reports false at the
// bound; release undoes it.
func (p *Proxy) acquire(c Caller) (release func(), ok bool) {
	max := p.MaxPerCaller
	if max <= 0 {
		max = DefaultMaxPerCaller
	}
	k := c.Identity.Tenant + "\x00" + c.Identity.Agent
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil {
		p.open = map[string]int{}
	}
	if p.open[k] >= max {
		return nil, false
	}
	p.open[k]++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.open[k]--; p.open[k] <= 0 {
			delete(p.open, k)
		}
	}, true
}

// DefaultMaxTunnel is a tunnel's longest life unless Proxy.MaxTunnel
// says otherwise.
const DefaultMaxTunnel = time.Hour

func (p *Proxy) maxTunnel() time.Duration {
	if p.MaxTunnel <= 0 {
		return DefaultMaxTunnel
	}
	return p.MaxTunnel
}

func (p *Proxy) dialer() *Dialer {
	if p.Dialer == nil {
		return &Dialer{}
	}
	return p.Dialer
}

func (p *Proxy) log() *slog.Logger {
	if p.Log == nil {
		return slog.Default()
	}
	return p.Log
}

func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func authRequired(w http.ResponseWriter) {
	w.Header().Set("Proxy-Authenticate", `Basic realm="custody"`)
	refuse(w, http.StatusProxyAuthRequired, "proxy authentication required")
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := destination(r)
	if err != nil {
		refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	caller, err := p.Authenticate(r)
	if err != nil {
		authRequired(w)
		return
	}
	releaseSlot, ok := p.acquire(caller)
	if !ok {
		p.log().Warn("egress refused: too many open connections", "tenant", caller.Identity.Tenant, "agent", caller.Identity.Agent)
		refuse(w, http.StatusTooManyRequests, "too many open connections")
		return
	}
	defer releaseSlot()
	if caller.Bind != nil {
		ctx, release := caller.Bind(r.Context())
		defer release()
		r = r.WithContext(ctx)
	}
	dec, err := p.Decide(r.Context(), caller, req)
	if errors.Is(err, ErrCaller) {
		authRequired(w)
		return
	}
	if err != nil {
		p.log().Warn("egress decision failed", "tenant", caller.Identity.Tenant, "agent", caller.Identity.Agent, "host", req.Host, "err", err)
		refuse(w, http.StatusServiceUnavailable, "egress decision unavailable")
		return
	}
	if !dec.Allow {
		p.log().Info("egress refused", "tenant", caller.Identity.Tenant, "agent", caller.Identity.Agent, "host", req.Host, "port", req.Port, "rules", dec.RuleIDs)
		refuse(w, http.StatusForbidden, "destination refused: "+strings.Join(dec.RuleIDs, ","))
		return
	}
	done := func(o Outcome) error {
		if p.Complete == nil {
			return nil
		}
		err := p.Complete(context.WithoutCancel(r.Context()), caller, dec, o)
		if err != nil {
			p.log().Warn("egress outcome not recorded", "tenant", caller.Identity.Tenant, "agent", caller.Identity.Agent, "call_id", dec.CallID, "err", err)
		}
		return err
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, req, done)
		return
	}
	p.forward(w, r, req, done)
}

// addrOutcome is prefix + ":" + addr, without addr if that would not fit.
func addrOutcome(prefix string, addr net.Addr) Outcome {
	if addr != nil && len(prefix)+1+len(addr.String()) <= 64 {
		return Outcome(prefix + ":" + addr.String())
	}
	return Outcome(prefix)
}

// destination reads what r asks for, the host a canonicalHost (a name
// with an empty label is refused). The host must be ASCII (a name in
// its IDNA A-label form, or an IP literal): the HTTP transport would dial
// a non-ASCII name's UTS 46 mapping, not the name the decision was about
// ("ｌｏｃａｌｈｏｓｔ" is localhost). A plain-HTTP URL's user
// information is dropped (neither decided on, recorded nor forwarded),
// and its method must be upper case.
func destination(r *http.Request) (Request, error) {
	if r.Method == http.MethodConnect {
		host, port, err := splitPort(r.Host, 0)
		if err != nil {
			return Request{}, fmt.Errorf("CONNECT target %q: want host:port", r.Host)
		}
		if !asciiHost(host) {
			return Request{}, errors.New("CONNECT target: the host must be ASCII (IDNA A-labels)")
		}
		if host, err = canonicalHost(host); err != nil {
			return Request{}, fmt.Errorf("CONNECT target: %v", err)
		}
		return Request{Method: r.Method, Host: host, Port: port}, nil
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" {
		return Request{}, errors.New("want CONNECT host:port or an absolute http:// URL")
	}
	// Methods are case-sensitive, but some servers read "post" as POST,
	// which a rule on args.method denying POST would not see.
	if strings.ToUpper(r.Method) != r.Method {
		return Request{}, errors.New("the method must be upper case")
	}
	host, port, err := splitPort(r.URL.Host, 80)
	if err != nil {
		return Request{}, fmt.Errorf("URL host %q: %v", r.URL.Host, err)
	}
	if !asciiHost(host) {
		return Request{}, errors.New("URL host: must be ASCII (IDNA A-labels)")
	}
	r.URL.User = nil
	c, err := canonicalHost(host)
	if err != nil {
		return Request{}, fmt.Errorf("URL host: %v", err)
	}
	if c != host {
		host = c
		if p := r.URL.Port(); p != "" {
			c = net.JoinHostPort(c, p)
		} else if strings.Contains(c, ":") {
			c = "[" + c + "]"
		}
		r.URL.Host = c
	}
	return Request{Method: r.Method, Host: host, Port: port, URL: r.URL.String()}, nil
}

// canonicalHost is host in the one spelling a rule on args.host sees
// (the dialer connects to the same): a name in lower case without its
// trailing dot (DNS tells neither apart), an IP literal as netip writes
// it, an IPv4-mapped IPv6 address as the IPv4 address (Go dials it so).
// A name with an empty label ("a..b", "a.b..") is refused.
func canonicalHost(host string) (string, error) {
	h := strings.TrimSuffix(host, ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String(), nil
	}
	h = strings.ToLower(h)
	if h == "" || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") {
		return "", fmt.Errorf("%q: empty label", host)
	}
	return h, nil
}

// asciiHost reports whether host is printable ASCII without spaces.
func asciiHost(host string) bool {
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// splitPort splits host[:port]; def is used when there is no port (0: a
// port is required).
func splitPort(hostport string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, err
		}
		host, ps = strings.Trim(hostport, "[]"), strconv.Itoa(def)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, errors.New("bad host or port")
	}
	return host, port, nil
}

// dialRefusal answers a failed dial: 403 for the dial-time check, 502
// otherwise.
func (p *Proxy) dialRefusal(w http.ResponseWriter, req Request, err error, done func(Outcome) error) {
	var de *DeniedError
	if errors.As(err, &de) {
		p.log().Info("egress refused at dial time", "host", req.Host, "addr", de.Addr, "kind", de.Kind, "rule", de.Rule)
		_ = done(Outcome("refused:" + de.Rule))
		refuse(w, http.StatusForbidden, "destination refused: "+de.Rule)
		return
	}
	_ = done("unreachable")
	refuse(w, http.StatusBadGateway, "destination unreachable")
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, req Request, done func(Outcome) error) {
	up, err := p.dialer().DialContext(r.Context(), "tcp", net.JoinHostPort(req.Host, strconv.Itoa(req.Port)))
	if err != nil {
		p.dialRefusal(w, req, err, done)
		return
	}
	if err := done(addrOutcome("connected", up.RemoteAddr())); err != nil {
		// No byte flows that the run does not say where it went.
		up.Close()
		refuse(w, http.StatusServiceUnavailable, "egress outcome not recorded")
		return
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		up.Close()
		return
	}
	c, brw, err := rc.Hijack()
	if err != nil {
		up.Close()
		return
	}
	// The tunnel ends with the credential (Caller.Bind) or at MaxTunnel.
	ctx, cancel := context.WithTimeout(r.Context(), p.maxTunnel())
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		c.Close()
		up.Close()
	})
	defer stop()
	// Bytes the client sent after the CONNECT headers are already
	// buffered.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			up.Close()
			c.Close()
			return
		}
	}
	tcpfwd.Join(c, up)
}

// maxResponseHeader bounds a destination's response header (the
// transport's own default is 10 MB, held per request): net/http's
// default bound on a request's header, which custody's listeners apply.
const maxResponseHeader = http.DefaultMaxHeaderBytes

// hopHeaders are removed in both directions (RFC 9110 7.6.1), with
// Proxy-Authorization: the custody key never leaves custody.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHop removes the hop-by-hop headers from h: hopHeaders and
// those its Connection header names.
func removeHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, req Request, done func(Outcome) error) {
	var remote net.Addr
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { remote = i.Conn.RemoteAddr() }}
	// A request, its response streamed included, lives at most
	// MaxTunnel too.
	ctx, cancel := context.WithTimeout(r.Context(), p.maxTunnel())
	defer cancel()
	out := r.Clone(httptrace.WithClientTrace(ctx, trace))
	out.RequestURI = ""
	out.Host = "" // the Host header is the URL's authority, as decided
	removeHop(out.Header)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil // present and empty: the transport adds none
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            p.dialer().DialContext,
		ResponseHeaderTimeout:  60 * time.Second,
		MaxResponseHeaderBytes: maxResponseHeader,
		DisableKeepAlives:      true,
		// Transparent: no Accept-Encoding the agent did not send, and
		// the body relayed as sent (custody inflates nothing).
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(out)
	if err != nil && remote != nil {
		// Connected, so the request may have been delivered (the
		// client hung up, or no response header came in time): not
		// "unreachable".
		_ = done(addrOutcome("connected", remote))
		refuse(w, http.StatusBadGateway, "destination unreachable")
		return
	}
	if err != nil {
		p.dialRefusal(w, req, err, done)
		return
	}
	_ = done(addrOutcome("status:"+strconv.Itoa(resp.StatusCode), remote)) // the request is delivered: its answer is relayed
	defer resp.Body.Close()
	removeHop(resp.Header)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if _, ok := resp.Header["Content-Type"]; !ok {
		w.Header()["Content-Type"] = nil // present and empty: the server sniffs none
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
