package egress

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttack9DeliveredRecordedUnreachable: a plain-HTTP request whose
// response did not come (the agent hung up once its body was sent, or
// the destination took longer than the response-header timeout) was
// completed as "unreachable" although it had been delivered: an agent
// could post data to an allowed destination and leave a record saying
// the destination was never reached. A request sent to an address is
// completed as connected:ADDR.
func TestAttack9DeliveredRecordedUnreachable(t *testing.T) {
	got := make(chan string, 1)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		<-release
	}))
	defer up.Close()
	defer close(release)
	f := newProxy(t, loopbackAllowed)
	conn, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	fmt.Fprintf(conn, "POST %s/x HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\nContent-Length: 6\r\n\r\nsecret", up.URL, auth)
	select {
	case b := <-got:
		if b != "secret" {
			t.Fatalf("upstream got %q", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the upstream")
	}
	conn.Close() // the agent hangs up before any response
	deadline := time.Now().Add(5 * time.Second)
	for len(f.completed()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	want := Outcome("c1=connected:" + up.Listener.Addr().String())
	if c := f.completed(); len(c) != 1 || c[0] != want {
		t.Fatalf("completed %v, want [%s]: the request reached the destination", c, want)
	}
}

// TestAttack9PlainHTTPOutlivesMaxTunnel: a tunnel lives at most
// MaxTunnel (a key's expiry does not cut what it opened, MaxTunnel
// bounds it), but a plain-HTTP request had no bound: a response the
// destination streams forever kept flowing (and held one of the agent's
// slots) past MaxTunnel, past the key's expiry.
func TestAttack9PlainHTTPOutlivesMaxTunnel(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for {
			if _, err := io.WriteString(w, "tick\n"); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	defer up.Close()
	p := &Proxy{Dialer: loopbackAllowed, MaxTunnel: 300 * time.Millisecond,
		Authenticate: func(*http.Request) (Caller, error) { return Caller{Run: "r1"}, nil },
		Decide:       func(context.Context, Caller, Request) (Decision, error) { return Decision{Allow: true}, nil },
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s/stream HTTP/1.1\r\nHost: x\r\n\r\n", up.URL)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	start := time.Now()
	_, err = io.Copy(io.Discard, resp.Body)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the response was still flowing after %v (%v), MaxTunnel 300ms", d, err)
	}
}

// TestAttack9HeldURLRecordedAsSent (held up, documented): a plain-HTTP
// request's URL is decided and recorded as it is sent: the path and
// query the destination receives are the recorded ones, percent-encoding
// and dot segments included (not normalized: a rule on a path is weak).
func TestAttack9HeldURLRecordedAsSent(t *testing.T) {
	var sent string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent = r.RequestURI }))
	defer up.Close()
	f := newProxy(t, loopbackAllowed)
	for _, p := range []string{"/%61dmin/./x?q=%2F", "/a/../admin", "//admin", "/a%2Fb"} {
		if code, body := rawThrough(t, f, "GET", up.URL+p); code != 200 {
			t.Fatalf("GET %s = %d %q", p, code, body)
		}
		f.mu.Lock()
		u, _ := url.Parse(f.asked[len(f.asked)-1].URL)
		f.mu.Unlock()
		if u.RequestURI() != sent {
			t.Errorf("recorded %q, the destination got %q", u.RequestURI(), sent)
		}
	}
}

// TestAttack9HugeResponseHeader: the plain-HTTP transport read up to
// net/http's default 10 MB of response header per request into memory
// before relaying it, so a destination an agent controls could make
// custody hold 10 MB for each of the agent's 64 requests (640 MB per
// agent, custody's signer and gateway sharing the process). The limit is
// the one custody's own listeners apply to a request's header (1 MB):
// over it the answer is 502.
func TestAttack9HugeResponseHeader(t *testing.T) {
	ln := tcpServer(t, func(c net.Conn) {
		_, _ = http.ReadRequest(bufio.NewReader(c))
		w := bufio.NewWriter(c)
		_, _ = w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n")
		for i := 0; i < 2<<10; i++ { // 2 MB
			fmt.Fprintf(w, "X-Pad-%d: %s\r\n", i, strings.Repeat("a", 1000))
		}
		_, _ = w.WriteString("\r\n")
		_ = w.Flush()
	})
	f := newProxy(t, loopbackAllowed)
	code, _ := rawThrough(t, f, "GET", "http://"+ln.Addr().String()+"/x")
	if code != http.StatusBadGateway {
		t.Fatalf("a 2 MB response header: %d, want 502", code)
	}
}

// TestAttack9TransportAddsGzip: the plain-HTTP transport asked the
// destination for gzip on the agent's behalf (Accept-Encoding added to a
// request without one) and inflated the answer itself: the request
// forwarded was not the one decided and recorded, and a destination the
// agent controls could make custody inflate a gzip bomb (10 MB to 10 GB,
// on custody's CPU, shared with the signer and gateway) for each of its
// requests. The proxy is transparent: it adds no Accept-Encoding and
// relays what the destination sent.
func TestAttack9TransportAddsGzip(t *testing.T) {
	var sawAE atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAE.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, "inflated")
		_ = zw.Close()
	}))
	defer up.Close()
	resp := getResponse(t, newProxy(t, loopbackAllowed), up.URL+"/x")
	defer resp.Body.Close()
	if ae, _ := sawAE.Load().(string); ae != "" {
		t.Errorf("the destination saw Accept-Encoding %q; the agent sent none", ae)
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "gzip" {
		t.Errorf("the agent got Content-Encoding %q: custody inflated the body itself", ce)
	}
}

// TestAttack9HeldNoUpgrade (held up): a plain-HTTP request cannot become
// a two-way channel the decision did not see: Upgrade and Connection are
// removed before forwarding, and a destination answering 101 anyway
// gets nothing the agent sends afterwards.
func TestAttack9HeldNoUpgrade(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Header.Get("Upgrade") != "" {
			got <- "Upgrade header forwarded"
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello")
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		b, _ := io.ReadAll(br)
		got <- string(b)
	}()
	f := newProxy(t, loopbackAllowed)
	conn, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	fmt.Fprintf(conn, "GET http://%s/ws HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", ln.Addr(), auth)
	time.Sleep(100 * time.Millisecond)
	_, _ = io.WriteString(conn, "agent bytes after the switch")
	if s := <-got; s != "" {
		t.Errorf("the destination got %q after its 101", s)
	}
}

// TestAttack9MethodCase: methods are case-sensitive (RFC 9110 9.1) and
// args.method is what a rule sees, but servers differ: some read "post"
// as POST, so a rule denying POST would miss it. A plain-HTTP method
// with a lower-case letter is refused (400) before any decision.
func TestAttack9MethodCase(t *testing.T) {
	var got atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Store(r.Method) }))
	defer up.Close()
	f := newProxy(t, loopbackAllowed)
	for _, m := range []string{"post", "Post", "gEt"} {
		if code, body := rawThrough(t, f, m, up.URL+"/x"); code != http.StatusBadRequest {
			t.Errorf("%s: %d %q, want 400", m, code, body)
		}
	}
	if m, _ := got.Load().(string); m != "" {
		t.Errorf("the destination got a %s", m)
	}
	f.mu.Lock()
	n := len(f.asked)
	f.mu.Unlock()
	if n != 0 {
		t.Errorf("%d decisions asked for refused methods", n)
	}
	for _, m := range []string{"POST", "PROPFIND", "M-SEARCH"} {
		if code, body := rawThrough(t, f, m, up.URL+"/x"); code != 200 {
			t.Errorf("%s: %d %q, want 200", m, code, body)
		}
	}
}

// TestAttack9NothingAdded: the proxy relays the request and the answer
// as they are: no User-Agent the agent did not send (Go's transport
// adds its own), no Content-Type the destination did not send (Go's
// server sniffs one).
func TestAttack9NothingAdded(t *testing.T) {
	var ua atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua.Store(r.Header.Values("User-Agent"))
		w.Header()["Content-Type"] = nil // httptest's server must not sniff either
		_, _ = io.WriteString(w, "<html><body>hello</body></html>")
	}))
	defer up.Close()
	resp := getResponse(t, newProxy(t, loopbackAllowed), up.URL+"/x")
	defer resp.Body.Close()
	if v, _ := ua.Load().([]string); len(v) != 0 {
		t.Errorf("the destination saw User-Agent %q; the agent sent none", v)
	}
	if ct, ok := resp.Header["Content-Type"]; ok {
		t.Errorf("the agent got Content-Type %q; the destination sent none", ct)
	}
}

// getResponse sends GET target through f's proxy (absolute form; the
// good key, nothing else but Host) and returns the response, its body
// unread.
func getResponse(t *testing.T, f *proxyFixture, target string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n", target, auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
