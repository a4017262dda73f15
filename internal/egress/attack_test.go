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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// TestAttackDialerCloudHostEndpoints: the dial-time check is the last
// word on what the egress proxy connects to, but it only knows
// metadata endpoints inside non-public ranges (or the few listed in
// policy.metadataIPs). Azure's WireServer, 168.63.129.16, is a
// host-provided endpoint in public address space that every Azure VM
// (and AKS pod, unless blocked) reaches: it serves the VM's goal state,
// extension configuration (protected settings, certificates) and
// DHCP/DNS, and it is the classic SSRF target on Azure (CVE-2021-27075
// and the "WireServing" research). It is classified public, so any
// tenant rule that allows public destinations (or a DNS name the agent
// controls that resolves to it) reaches it.
func TestAttackDialerCloudHostEndpoints(t *testing.T) {
	d := &Dialer{}
	for _, addr := range []string{
		"168.63.129.16:80",    // Azure WireServer
		"168.63.129.16:32526", // Azure WireServer (HostGAPlugin)
	} {
		err := d.check(addr)
		var de *DeniedError
		if !errors.As(err, &de) {
			t.Errorf("check(%s) = %v: the dialer would connect to a cloud host endpoint", addr, err)
		}
	}
}

// TestAttackDialerProbe (held up): every other internal notation tried
// is refused at dial time.
func TestAttackDialerProbe(t *testing.T) {
	d := &Dialer{}
	for _, addr := range []string{
		"127.0.0.1:80", "[::ffff:127.0.0.1]:80", "[::ffff:a9fe:a9fe]:80", "[::127.0.0.1]:80",
		"[64:ff9b::a9fe:a9fe]:80", "[64:ff9b:1:a9fe:a9:fe00::]:80", "[2002:a9fe:a9fe::1]:80",
		"[2001:0:4136:e378:8000:63bf:5601:5601]:80", // Teredo, client ~a9fe:a9fe
		"[::ffff:0:7f00:1]:80", "0.0.0.0:80", "[::]:80", "[fe80::1%25lo]:80", "[fd00:ec2::254]:80",
		"100.100.100.200:80", "169.254.170.2:80", "[fd20:ce::254]:80", "192.0.0.192:80", "10.0.0.1:80",
		"255.255.255.255:80", "[ff02::1]:80", "[::1]:80",
	} {
		err := d.check(addr)
		var de *DeniedError
		if !errors.As(err, &de) {
			t.Errorf("check(%s) = %v", addr, err)
		}
	}
}

// echoServer accepts TCP connections on loopback and echoes lines back.
func echoServer(t *testing.T) net.Listener {
	t.Helper()
	return tcpServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// tcpServer listens on 127.0.0.1 until the test ends and runs handle for
// each connection in its own goroutine, closing the connection when
// handle returns.
func tcpServer(t *testing.T, handle func(c net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
	return ln
}

// openTunnel sends CONNECT target through proxyAddr with key and returns
// the connection once the proxy answered 200.
func openTunnel(t *testing.T, proxyAddr, target, key string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + key))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %d", resp.StatusCode)
	}
	return c, br
}

func echoOnce(c net.Conn, br *bufio.Reader, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	return br.ReadString('\n')
}

// TestAttackHeldEgressTunnelNotCutByReadTimeout (held up): custody
// serve's http.Server has ReadTimeout (60 s); net/http (go1.26) clears
// the connection's deadlines on Hijack, so a tunnel is not cut by it.
func TestAttackHeldEgressTunnelNotCutByReadTimeout(t *testing.T) {
	ln := echoServer(t)
	p := &Proxy{
		Dialer: loopbackAllowed,
		Authenticate: func(r *http.Request) (Caller, error) {
			return Caller{Identity: apikey.Identity{Tenant: "agents", Agent: "a"}, Run: "r1"}, nil
		},
		Decide: func(context.Context, Caller, Request) (Decision, error) {
			return Decision{Allow: true, CallID: "c1"}, nil
		},
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config.ReadTimeout = time.Second // as runServers sets it (60 s)
	srv.Start()
	defer srv.Close()
	c, br := openTunnel(t, srv.Listener.Addr().String(), ln.Addr().String(), "k")
	defer c.Close()
	if got, err := echoOnce(c, br, "one"); err != nil || got != "one\n" {
		t.Fatalf("first echo = %q, %v", got, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if got, err := echoOnce(c, br, "two"); err != nil || got != "two\n" {
		t.Fatalf("echo after ReadTimeout = %q, %v: the tunnel died with the server's read deadline", got, err)
	}
}

// TestAttackEgressUserinfoRecorded: a plain-HTTP request to
// http://user:PASSWORD@host/ is decided with args.url holding the
// password (Request.URL is r.URL.String()), so the destination's
// credential is signed into the run's transparency log (args are
// committed, but revealable and shown to operators; the policy's CEL
// sees it too). The password is not even sent upstream (net/http's
// Transport ignores URL userinfo): recording it serves nothing.
func TestAttackEgressUserinfoRecorded(t *testing.T) {
	var sawAuth string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth = r.Header.Get("Authorization")
	}))
	defer up.Close()
	f := newProxy(t, loopbackAllowed)
	conn, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	target := strings.Replace(up.URL, "http://", "http://deploy:s3cr3t-db-password@", 1) + "/x"
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: ignored\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n", target, auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Logf("status %d, upstream Authorization %q", resp.StatusCode, sawAuth)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.asked {
		if strings.Contains(r.URL, "s3cr3t-db-password") {
			t.Fatalf("decided (and recorded) url %q holds the URL's password", r.URL)
		}
	}
}

// TestAttackEgressIDNAHostMismatch: a plain-HTTP request is decided on
// the URL's host as written, but net/http's Transport dials (and sends
// as Host) its IDNA/UTS-46 mapping: fullwidth (and other compatibility)
// letters become ASCII. "http://ｅｖｉｌ.example/" is decided (and
// recorded) as host "ｅｖｉｌ.example", which no rule on "evil.example"
// matches, and connects to evil.example. Here a Decide that denies
// "localhost" is passed by "ｌｏｃａｌｈｏｓｔ" (the dial lands on loopback
// only because the test's Dialer allows 127.0.0.0/8).
func TestAttackEgressIDNAHostMismatch(t *testing.T) {
	var hits atomic.Int32
	var sawHost string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		sawHost = r.Host
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	f := newProxy(t, loopbackAllowed)
	f.deny["localhost"] = true
	conn, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	target := "http://ｌｏｃａｌｈｏｓｔ:" + port + "/x"
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n", target, auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	f.mu.Lock()
	asked := append([]Request(nil), f.asked...)
	f.mu.Unlock()
	t.Logf("status %d %q; decided %+v; upstream saw Host %q", resp.StatusCode, body, asked, sawHost)
	if hits.Load() > 0 {
		t.Fatalf("a request decided for host %q reached localhost (Host %q): a deny on localhost was passed", asked[0].Host, sawHost)
	}
}

// TestAttackEgressHostHeaderMismatch (held up: net/http sets r.Host to
// the absolute URL's authority): a plain-HTTP request in absolute
// form is decided (and recorded) on the URL's host, but the request
// forwarded upstream kept the client's own Host header: a request for
// http://allowed.example/ with "Host: internal.example" reaches
// allowed.example's address asking for internal.example, which a shared
// front end (a CDN, an ingress, a cloud load balancer) routes by Host to
// a virtual host no rule allowed and the record does not name. RFC 9112
// 3.2.2: a proxy replaces Host with the target URI's authority.
func TestAttackEgressHostHeaderMismatch(t *testing.T) {
	var sawHost string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawHost = r.Host
	}))
	defer up.Close()
	f := newProxy(t, loopbackAllowed)
	conn, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
	fmt.Fprintf(conn, "GET %s/x HTTP/1.1\r\nHost: metadata.google.internal\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n", up.URL, auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := strings.TrimPrefix(up.URL, "http://")
	if sawHost != want {
		t.Fatalf("upstream saw Host %q for a request decided on %q", sawHost, want)
	}
}

// TestAttackEgressHostCaseAndDot: the host is decided as asked, but DNS
// does not tell "Pastebin.COM" or "pastebin.com." from pastebin.com: a
// tenant rule denying args.host == "pastebin.com" (under a rule that
// allows the rest) was passed by either spelling, which the dialer
// resolves to the same addresses. A name is decided (and dialled) in
// lower case without its trailing dot.
func TestAttackEgressHostCaseAndDot(t *testing.T) {
	f := newProxy(t, loopbackAllowed)
	f.deny["pastebin.com"] = true
	for _, target := range []string{"Pastebin.COM:443", "pastebin.com.:443", "PASTEBIN.COM.:443"} {
		conn, err := net.Dial("tcp", f.url.Host)
		if err != nil {
			t.Fatal(err)
		}
		auth := base64.StdEncoding.EncodeToString([]byte("r1:" + goodKey))
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s = %d, want 403 (a deny on pastebin.com)", target, resp.StatusCode)
		}
	}
	if code := getThrough(t, f, "http://PASTEBIN.com.:8080/x"); code != http.StatusForbidden {
		t.Errorf("GET http://PASTEBIN.com.:8080/x = %d, want 403", code)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.asked); n == 0 || f.asked[n-1].URL != "http://pastebin.com:8080/x" {
		t.Errorf("decided %+v, want the URL http://pastebin.com:8080/x", f.asked)
	}
	for _, r := range f.asked {
		if r.Host != "pastebin.com" {
			t.Errorf("decided host %q, want pastebin.com", r.Host)
		}
	}
}

// getThrough sends GET target through f's proxy (absolute form) and returns the
// status.
func getThrough(t *testing.T, f *proxyFixture, target string) int {
	t.Helper()
	resp := getResponse(t, f, target)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAttackEgressResponseConnectionHeaders: the request's Connection
// header names hop-by-hop headers that are removed before forwarding,
// but the response's were not: an upstream's "Connection: X-Hop"
// reached the client with X-Hop (RFC 9110 7.6.1: a proxy removes the
// headers Connection names, in both directions).
func TestAttackEgressResponseConnectionHeaders(t *testing.T) {
	// A raw upstream: net/http's server replaces a handler's Connection
	// header when the request asks to close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = http.ReadRequest(bufio.NewReader(c))
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: upstream-only\r\nX-End: kept\r\nContent-Length: 0\r\n\r\n")
	}()
	f := newProxy(t, loopbackAllowed)
	resp, err := f.client(goodKey).Get("http://" + ln.Addr().String() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := resp.Header.Get("X-Hop"); v != "" || resp.Header.Get("X-End") != "kept" {
		t.Errorf("client got X-Hop %q, X-End %q; want X-Hop removed, X-End kept", v, resp.Header.Get("X-End"))
	}
}
