package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// noDNS is a Dialer that resolves nothing (no packet leaves loopback):
// its resolver's DNS transport always fails.
var noDNS = &Dialer{AllowPrefixes: loopbackAllowed.AllowPrefixes, Resolver: &net.Resolver{
	PreferGo: true,
	Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in tests")
	},
}}

// rawThrough sends one raw request (with the good key) through f and
// returns the status and body.
func rawThrough(t *testing.T, f *proxyFixture, method, target string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n", method, target, auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodConnect && resp.StatusCode == 200 {
		return 200, "" // the tunnel's bytes are no body
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAttack9HeldUnbracketedIPv6Port (held up: net/url in go1.26
// refuses an unbracketed colon in a host): a plain-HTTP URL whose host
// is an IPv6 literal without brackets, http://2001:db8::1:22/, would be
// decided as the IP 2001:db8::1:22, port 80 (net.SplitHostPort fails on
// it, so splitPort takes the default port), while net/http's Transport
// dials URL.Hostname():URL.Port(), [2001:db8::1]:22.
func TestAttack9HeldUnbracketedIPv6Port(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	f := newProxy(t, loopbackAllowed)
	for _, target := range []string{
		"http://::ffff:127.0.0.1:" + port + "/x",
		"http://::FFFF:7f00:1:" + port + "/x",
	} {
		if code, body := rawThrough(t, f, "GET", target); code != http.StatusBadRequest {
			t.Errorf("GET %s = %d %q, want 400", target, code, body)
		}
	}
	if n := hits.Load(); n != 0 || len(f.asked) != 0 {
		t.Errorf("upstream reached %d times, decided %+v", n, f.asked)
	}
}

// TestAttack9ExtraTrailingDots: a name is decided in lower case without
// its trailing dot, but only one dot was trimmed: "pastebin.com.." was
// decided as "pastebin.com." (which a deny on "pastebin.com" does not
// match) and dialled as "pastebin.com.", the same DNS name. A name with an
// empty label is no name: it is refused.
func TestAttack9ExtraTrailingDots(t *testing.T) {
	f := newProxy(t, noDNS)
	f.deny["pastebin.com"] = true
	for _, tc := range []struct{ method, target string }{
		{"CONNECT", "pastebin.com..:443"},
		{"CONNECT", "PASTEBIN.COM...:443"},
		{"GET", "http://pastebin.com../x"},
	} {
		code, body := rawThrough(t, f, tc.method, tc.target)
		if code != http.StatusForbidden && code != http.StatusBadRequest {
			t.Errorf("%s %s = %d %q, want 403 or 400", tc.method, tc.target, code, body)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.asked {
		if r.Host != "pastebin.com" {
			t.Errorf("decided host %q: a deny on pastebin.com does not see it", r.Host)
		}
	}
}

// TestAttack9IPLiteralSpellings: an IP literal was decided as written,
// so a rule on args.host == "127.0.0.1" (or "::1") was passed by another
// spelling of the same address: IPv4-mapped IPv6 (which Go dials as
// IPv4), upper case, leading zeros and expanded zero groups. An IP
// literal is decided in one spelling (netip's, IPv4-mapped unmapped).
func TestAttack9IPLiteralSpellings(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	f := newProxy(t, &Dialer{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	f.deny["127.0.0.1"] = true
	f.deny["::1"] = true
	for _, host := range []string{
		"[::ffff:127.0.0.1]", "[::FFFF:7F00:1]", "[0:0:0:0:0:ffff:7f00:0001]",
		"[0:0::1]", "[::0001]", "[0000:0000:0000:0000:0000:0000:0000:0001]",
		"127.0.0.1.", "[::ffff:127.0.0.1.]",
	} {
		code, body := rawThrough(t, f, "CONNECT", host+":"+port)
		if code != http.StatusForbidden && code != http.StatusBadRequest {
			t.Errorf("CONNECT %s:%s = %d %q, want 403 (a deny on 127.0.0.1 and ::1)", host, port, code, body)
		}
		code, body = rawThrough(t, f, "GET", "http://"+host+":"+port+"/x")
		if code != http.StatusForbidden && code != http.StatusBadRequest {
			t.Errorf("GET http://%s:%s/x = %d %q, want 403", host, port, code, body)
		}
	}
}

// TestAttack9TunnelEOFThroughSourceLimit: custody serves the egress
// listener under LimitBySource (and netutil.LimitListener), whose
// connections hide *net.TCPConn's CloseWrite. When the destination
// closed, tcpfwd.Join could not pass the end on to the client: the
// tunnel stayed open (the client waiting for an EOF that never came,
// one of the agent's MaxPerCaller slots held) until the client gave up
// or MaxTunnel (an hour) passed.
func TestAttack9TunnelEOFThroughSourceLimit(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "bye")
		c.Close()
	}()
	proxy := &Proxy{Dialer: loopbackAllowed,
		Authenticate: func(*http.Request) (Caller, error) { return Caller{Run: "r1"}, nil },
		Decide:       func(context.Context, Caller, Request) (Decision, error) { return Decision{Allow: true}, nil },
	}
	srv := httptest.NewUnstartedServer(proxy)
	srv.Listener = LimitBySource(srv.Listener, 8, nil)
	srv.Start()
	defer srv.Close()
	c, br := openTunnel(t, srv.Listener.Addr().String(), up.Addr().String(), goodKey)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	got, err := io.ReadAll(br)
	if string(got) != "bye" || err != nil {
		t.Fatalf("read %q, %v: want \"bye\" then EOF once the destination closed", got, err)
	}
}

// TestAttack9HeldHopByHopAndSmuggling (held up): the custody key never
// reaches the destination, however the request names it (Connection:
// Proxy-Authorization, Proxy-Connection, Keep-Alive, Upgrade); a
// request carrying both Content-Length and Transfer-Encoding, or two
// different Content-Lengths, smuggles no second request past the
// decision (net/http refuses or re-frames it); a second request on a
// kept-alive connection is authenticated and decided on its own.
func TestAttack9HeldHopByHopAndSmuggling(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, goodKey) || strings.HasPrefix(k, "Proxy-") || k == "Upgrade" || k == "Keep-Alive" {
					t.Errorf("upstream saw %s: %s", k, v)
				}
			}
		}
		if strings.Contains(string(b), goodKey) {
			t.Errorf("upstream saw the key in the body")
		}
	}))
	defer up.Close()
	f := newProxy(t, loopbackAllowed)
	f.deny["evil.example"] = true
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	send := func(raw string) string {
		conn, err := net.Dial("tcp", f.url.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = io.WriteString(conn, raw)
		b, _ := io.ReadAll(conn)
		return string(b)
	}
	h := "Host: x\r\nProxy-Authorization: Basic " + auth + "\r\n"
	send("GET " + up.URL + "/hop HTTP/1.1\r\n" + h + "Connection: Proxy-Authorization, Keep-Alive, Upgrade\r\nProxy-Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nUpgrade: websocket\r\n\r\n" +
		"GET http://evil.example/pipelined HTTP/1.1\r\n" + h + "Connection: close\r\n\r\n")
	smuggled := "GET http://evil.example/smuggled HTTP/1.1\r\n" + h + "\r\n"
	send("POST " + up.URL + "/clte HTTP/1.1\r\n" + h + "Content-Length: " + fmt.Sprint(5+len(smuggled)) + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled)
	send("POST " + up.URL + "/clcl HTTP/1.1\r\n" + h + "Content-Length: 0\r\nContent-Length: " + fmt.Sprint(len(smuggled)) + "\r\n\r\n" + smuggled)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, "smuggled") || strings.Contains(s, "pipelined") {
			t.Errorf("upstream got %s", s)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var evil int
	for _, r := range f.asked {
		if r.Host == "evil.example" {
			evil++
		}
	}
	if evil == 0 {
		t.Errorf("the pipelined request was not decided: %+v", f.asked)
	}
}

// TestAttack9HeldDestinationForms (held up): forms that would let the
// decided destination differ from the dialled one are refused before any
// decision (400): a non-ASCII or percent-encoded non-ASCII host, an
// empty host, ports 0, 65536 and "+443", an https:// or ws:// URL, a
// scheme-relative or origin-form target, and a host with a space. Forms
// Go parses to the same name (userinfo, an absolute-form path on
// CONNECT) are decided on that name.
func TestAttack9HeldDestinationForms(t *testing.T) {
	f := newProxy(t, noDNS)
	for _, tc := range []struct{ method, target string }{
		{"CONNECT", ":443"}, {"CONNECT", "pastebin.com:0"}, {"CONNECT", "pastebin.com:65536"},
		{"CONNECT", "pastebin.com"}, {"CONNECT", "ｐastebin.com:443"}, {"CONNECT", "pastebin.com:+443"},
		{"GET", "http://%ef%bd%90astebin.com/"}, {"GET", "http://:80/"}, {"GET", "http://pastebin.com:0/"},
		{"GET", "https://pastebin.com/"}, {"GET", "ws://pastebin.com/"}, {"GET", "//pastebin.com/"},
		{"GET", "/pastebin.com"}, {"GET", "http:pastebin.com"}, {"GET", "http://pastebin.com:/"},
		{"GET", "http://[::1]x/"}, {"GET", "http://a:b:80/"},
	} {
		code, body := rawThrough(t, f, tc.method, tc.target)
		if code != http.StatusBadRequest {
			t.Errorf("%s %s = %d %q, want 400", tc.method, tc.target, code, body)
		}
	}
	f.mu.Lock()
	asked := append([]Request(nil), f.asked...)
	f.mu.Unlock()
	if len(asked) != 0 {
		t.Errorf("decided %+v", asked)
	}
	f.deny["pastebin.com"] = true
	for _, tc := range []struct{ method, target string }{
		{"CONNECT", "allowed.example:443@pastebin.com:443"}, {"CONNECT", "pastebin.com:443/x"},
		{"GET", "http://allowed.example@pastebin.com/"}, {"GET", "http://pastebin.com:0080/"},
	} {
		if code, body := rawThrough(t, f, tc.method, tc.target); code != http.StatusForbidden {
			t.Errorf("%s %s = %d %q, want 403 (decided as pastebin.com)", tc.method, tc.target, code, body)
		}
	}
}

// fromConn is a connection from a given source address.
type fromConn struct {
	net.Conn
	from net.Addr
}

func (c fromConn) RemoteAddr() net.Addr { return c.from }

// fromListener hands out one connection per source address given.
type fromListener struct {
	net.Listener
	srcs chan net.Addr
}

func (l fromListener) Accept() (net.Conn, error) {
	a, ok := <-l.srcs
	if !ok {
		return nil, net.ErrClosed
	}
	c, _ := net.Pipe()
	return fromConn{Conn: c, from: a}, nil
}

// TestAttack9SourceLimitIPv6Neighbours: LimitBySource counted an IPv6
// source by its /64, but a Kubernetes node's pods share one /64 (the
// node's pod CIDR, kubeadm's and kind's default mask): one sandbox
// holding the cap in (unauthenticated, idle or tunnel) connections shut
// every other pod on its node out of the egress proxy. A pod has one
// address per family (no NET_ADMIN to add more): the cap is per address.
func TestAttack9SourceLimitIPv6Neighbours(t *testing.T) {
	srcs := make(chan net.Addr, 4)
	var refused atomic.Int64
	ln := LimitBySource(fromListener{srcs: srcs}, 1, &refused)
	srcs <- &net.TCPAddr{IP: net.ParseIP("fd00:10:244:1::5"), Port: 40000} // the greedy pod
	srcs <- &net.TCPAddr{IP: net.ParseIP("fd00:10:244:1::5"), Port: 40001} // over its cap
	srcs <- &net.TCPAddr{IP: net.ParseIP("fd00:10:244:1::6"), Port: 40000} // its neighbour
	close(srcs)
	var got []string
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		got = append(got, c.RemoteAddr().String())
		defer c.Close()
	}
	if len(got) != 2 || got[1] != "[fd00:10:244:1::6]:40000" || refused.Load() != 1 {
		t.Fatalf("accepted %v, refused %d: want the greedy pod's first and its neighbour's", got, refused.Load())
	}
}

// fakeDNS is a resolver answering from answers (name -> A/AAAA
// addresses, one list per lookup in turn, the last kept), in memory: no
// packet leaves the process.
func fakeDNS(t *testing.T, answers map[string][][]netip.Addr) *net.Resolver {
	var mu sync.Mutex
	served := map[string]int{}
	answer := func(q dnsmessage.Question) []netip.Addr {
		mu.Lock()
		defer mu.Unlock()
		name := strings.TrimSuffix(q.Name.String(), ".")
		lists := answers[name]
		if len(lists) == 0 {
			return nil
		}
		i := served[name+q.Type.String()]
		served[name+q.Type.String()]++
		if i >= len(lists) {
			i = len(lists) - 1
		}
		var out []netip.Addr
		for _, a := range lists[i] {
			if a.Is4() == (q.Type == dnsmessage.TypeA) {
				out = append(out, a)
			}
		}
		return out
	}
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for {
				var l [2]byte
				if _, err := io.ReadFull(server, l[:]); err != nil {
					return
				}
				msg := make([]byte, int(l[0])<<8|int(l[1]))
				if _, err := io.ReadFull(server, msg); err != nil {
					return
				}
				var p dnsmessage.Parser
				h, err := p.Start(msg)
				if err != nil {
					return
				}
				q, err := p.Question()
				if err != nil {
					return
				}
				b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true})
				b.EnableCompression()
				_ = b.StartQuestions()
				_ = b.Question(q)
				_ = b.StartAnswers()
				addrs := answer(q)
				for _, a := range addrs {
					rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
					if a.Is4() {
						_ = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
					} else {
						_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
					}
				}
				out, err := b.Finish()
				if err != nil {
					return
				}
				if _, err := server.Write(append([]byte{byte(len(out) >> 8), byte(len(out))}, out...)); err != nil {
					return
				}
			}
		}()
		return client, nil
	}}
}

// TestAttack9HeldDNS (held up): names are decided, addresses are
// checked at dial time after DNS, for every address tried: a name whose
// answer holds a refused address next to an allowed one connects to the
// allowed one only (and records it); a name that rebinds from an allowed
// address to a refused one between two requests (or between a client's
// own lookup and the proxy's) is refused at dial time with no
// connection made; an IPv4-mapped AAAA is checked as the IPv4 address.
// Here 127.0.0.1 is "allowed" and 127.0.0.2 stands for a forbidden
// address (a listener on it counts what would have reached it).
func TestAttack9HeldDNS(t *testing.T) {
	good := tcpServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	_, port, _ := net.SplitHostPort(good.Addr().String())
	bad, err := net.Listen("tcp", "127.0.0.2:"+port)
	if err != nil {
		t.Fatal("a listener on 127.0.0.2 (Linux routes 127.0.0.0/8 to lo):", err)
	}
	defer bad.Close()
	var badHits atomic.Int32
	go func() {
		for {
			c, err := bad.Accept()
			if err != nil {
				return
			}
			badHits.Add(1)
			c.Close()
		}
	}()
	ok, no := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	d := &Dialer{
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolver: fakeDNS(t, map[string][][]netip.Addr{
			"mixed.test":  {{no, ok}},
			"rebind.test": {{ok}, {no}},
			"mapped.test": {{netip.MustParseAddr("::ffff:127.0.0.2")}},
		}),
	}
	f := newProxy(t, d)
	if code, body := rawThrough(t, f, "CONNECT", "mixed.test:"+port); code != 200 {
		t.Errorf("CONNECT mixed.test = %d %q, want 200 (to 127.0.0.1)", code, body)
	}
	if code, body := rawThrough(t, f, "CONNECT", "rebind.test:"+port); code != 200 {
		t.Errorf("CONNECT rebind.test (first answer) = %d %q, want 200", code, body)
	}
	for _, target := range []string{"rebind.test:" + port, "mapped.test:" + port} {
		if code, body := rawThrough(t, f, "CONNECT", target); code != http.StatusForbidden {
			t.Errorf("CONNECT %s = %d %q, want 403 at dial time", target, code, body)
		}
	}
	want := []Outcome{Outcome("c1=connected:" + good.Addr().String()), Outcome("c2=connected:" + good.Addr().String()),
		"c3=refused:" + RuleInternal, "c4=refused:" + RuleInternal}
	if got := f.completed(); !slices.Equal(got, want) {
		t.Errorf("completed %v, want %v", got, want)
	}
	time.Sleep(50 * time.Millisecond)
	if n := badHits.Load(); n != 0 {
		t.Errorf("the refused address was connected to %d times", n)
	}
}

// TestAttack9HeldTunnelsLeaveNothing (held up): tunnels closed by the
// client (after a half-close, or at once) and tunnels whose destination
// hangs up leave no goroutine behind, and an agent's slots come back.
func TestAttack9HeldTunnelsLeaveNothing(t *testing.T) {
	ln := echoServer(t)
	hangup := tcpServer(t, func(net.Conn) {})
	f := newProxy(t, loopbackAllowed)
	before := runtime.NumGoroutine()
	for i := 0; i < 3*DefaultMaxPerCaller; i++ {
		target := ln.Addr().String()
		if i%3 == 2 {
			target = hangup.Addr().String()
		}
		c, br := openTunnel(t, f.url.Host, target, goodKey)
		switch i % 3 {
		case 0:
			if got, err := echoOnce(c, br, "x"); err != nil || got != "x\n" {
				t.Fatalf("echo %q %v", got, err)
			}
			_ = c.(*net.TCPConn).CloseWrite()
			_, _ = io.ReadAll(br)
		case 2:
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := io.ReadAll(br); err != nil {
				t.Fatalf("a tunnel whose destination hung up: %v", err)
			}
		}
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+4 {
		t.Errorf("%d goroutines, %d before the tunnels", n, before)
	}
}

// TestAttack9TunnelUnrecordedOutcome: a tunnel's outcome (the address
// dialled) is recorded before its bytes flow, but when Complete failed
// (the signer handed over, the run closed in between) the error was
// only logged and the tunnel carried bytes all the same, the run saying
// "allowed" and never where to. Unrecorded, it is refused (503).
func TestAttack9TunnelUnrecordedOutcome(t *testing.T) {
	var got atomic.Int32
	up := tcpServer(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		got.Add(int32(n))
	})
	p := &Proxy{Dialer: loopbackAllowed,
		Authenticate: func(*http.Request) (Caller, error) { return Caller{Run: "r1"}, nil },
		Decide: func(context.Context, Caller, Request) (Decision, error) {
			return Decision{Allow: true, CallID: "c1"}, nil
		},
		Complete: func(context.Context, Caller, Decision, Outcome) error {
			return errors.New("no signer on this replica")
		},
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := up.Addr().String()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nunrecorded bytes", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, "more")
	time.Sleep(100 * time.Millisecond)
	conn.Close()
	time.Sleep(100 * time.Millisecond)
	if resp.StatusCode != http.StatusServiceUnavailable || got.Load() != 0 {
		t.Fatalf("CONNECT = %d, %d bytes reached the destination: want 503 and none", resp.StatusCode, got.Load())
	}
}
