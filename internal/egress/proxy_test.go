package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

const goodKey = "ck_test-key"

// proxyFixture is a Proxy on loopback with a recording Decide.
type proxyFixture struct {
	url       *url.URL
	mu        sync.Mutex
	asked     []Request
	deny      map[string]bool // hosts denied by Decide
	failing   bool
	callerErr bool // Decide refuses the caller
	outcomes  []Outcome
}

func (f *proxyFixture) completed() []Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Outcome(nil), f.outcomes...)
}

func newProxy(t *testing.T, d *Dialer) *proxyFixture {
	t.Helper()
	f := &proxyFixture{deny: map[string]bool{}}
	p := &Proxy{
		Dialer: d,
		Authenticate: func(r *http.Request) (Caller, error) {
			v := r.Header.Get("Proxy-Authorization")
			if b, ok := strings.CutPrefix(v, "Basic "); ok {
				raw, _ := base64.StdEncoding.DecodeString(b)
				if _, pw, _ := strings.Cut(string(raw), ":"); pw == goodKey {
					return Caller{Identity: apikey.Identity{Tenant: "agents", Agent: "run-1"}, Run: "r1"}, nil
				}
			}
			return Caller{}, errors.New("no key")
		},
		Decide: func(_ context.Context, c Caller, req Request) (Decision, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.failing {
				return Decision{}, errors.New("signer down")
			}
			if f.callerErr {
				return Decision{}, fmt.Errorf("run r1 is not yours: %w", ErrCaller)
			}
			f.asked = append(f.asked, req)
			if f.deny[req.Host] {
				return Decision{RuleIDs: []string{"AGENTS-009"}}, nil
			}
			return Decision{Allow: true, RuleIDs: []string{"AGENTS-001"}, CallID: fmt.Sprint("c", len(f.asked))}, nil
		},
		Complete: func(_ context.Context, c Caller, d Decision, o Outcome) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.outcomes = append(f.outcomes, Outcome(d.CallID+"="+string(o)))
			return nil
		},
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	f.url, _ = url.Parse(srv.URL)
	return f
}

// client goes through the proxy with the key as the proxy password (how
// HTTP_PROXY=http://x:KEY@host:port carries it).
func (f *proxyFixture) client(key string) *http.Client {
	u := *f.url
	if key != "" {
		u.User = url.UserPassword("x", key)
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&u),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the test's own TLS server
	}}
}

var loopbackAllowed = &Dialer{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// A plain-HTTP request is decided and forwarded; the upstream never sees
// the custody key or any proxy header.
func TestForwardPlainHTTP(t *testing.T) {
	var seen http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		_, _ = io.WriteString(w, "hello from upstream")
	}))
	defer up.Close()
	f := newProxy(t, loopbackAllowed)
	resp, err := f.client(goodKey).Get(up.URL + "/path?q=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello from upstream" {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
	for k, vs := range seen {
		for _, v := range vs {
			if strings.Contains(v, goodKey) || strings.HasPrefix(k, "Proxy-") {
				t.Errorf("upstream saw %s: %s", k, v)
			}
		}
	}
	if len(f.asked) != 1 || f.asked[0].Method != "GET" || !strings.HasSuffix(f.asked[0].URL, "/path?q=1") {
		t.Errorf("decided %+v", f.asked)
	}
	if got, want := f.completed(), []Outcome{Outcome("c1=status:200:" + up.Listener.Addr().String())}; !slices.Equal(got, want) {
		t.Errorf("completed %v, want %v (the status and the address dialled)", got, want)
	}
}

// A CONNECT tunnel carries TLS end to end once decided.
func TestConnectTunnel(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "tls ok")
	}))
	defer up.Close()
	f := newProxy(t, loopbackAllowed)
	resp, err := f.client(goodKey).Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "tls ok" {
		t.Fatalf("got %q", b)
	}
	if len(f.asked) != 1 || f.asked[0].Method != "CONNECT" || f.asked[0].Host != "127.0.0.1" {
		t.Errorf("decided %+v", f.asked)
	}
	if got, want := f.completed(), []Outcome{Outcome("c1=connected:" + up.Listener.Addr().String())}; !slices.Equal(got, want) {
		t.Errorf("completed %v, want %v", got, want)
	}
}

// Refusals: no key (407), a denied host (403 with the rule, upstream never
// reached), a name resolving to loopback without an operator allowance
// (403 at dial time), decisions unavailable (503, fail closed), and a
// request in origin form (400).
func TestRefusals(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))

	f := newProxy(t, loopbackAllowed)
	resp, err := f.client("").Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired || resp.Header.Get("Proxy-Authenticate") == "" {
		t.Errorf("no key: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = f.client("ck_wrong").Get(up.URL)
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("wrong key: %d", resp.StatusCode)
	}

	f.deny["127.0.0.1"] = true
	resp, err = f.client(goodKey).Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.TrimSpace(string(b)) != "destination refused: AGENTS-009" {
		t.Errorf("denied host: %d %q", resp.StatusCode, b)
	}

	strict := newProxy(t, &Dialer{})
	for _, target := range []string{"http://localhost:" + port + "/", "http://127.0.0.1:" + port + "/"} {
		resp, err = strict.client(goodKey).Get(target)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || strings.TrimSpace(string(b)) != "destination refused: "+RuleInternal {
			t.Errorf("%s: %d %q, want 403 %s", target, resp.StatusCode, b, RuleInternal)
		}
	}
	// CONNECT to a name that resolves to loopback: refused at dial time.
	c, err := net.Dial("tcp", strict.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("x:" + goodKey))
	_, _ = io.WriteString(c, "CONNECT localhost:"+port+" HTTP/1.1\r\nHost: localhost:"+port+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
	line := make([]byte, 12)
	_, _ = io.ReadFull(c, line)
	c.Close()
	if string(line) != "HTTP/1.1 403" {
		t.Errorf("CONNECT localhost: %q, want HTTP/1.1 403", line)
	}
	// Each refusal at dial time is the allowed call's recorded outcome.
	want := []Outcome{"c1=refused:" + RuleInternal, "c2=refused:" + RuleInternal, "c3=refused:" + RuleInternal}
	if got := strict.completed(); !slices.Equal(got, want) {
		t.Errorf("completed %v, want %v", got, want)
	}

	f.deny = map[string]bool{}
	f.callerErr = true
	resp, _ = f.client(goodKey).Get(up.URL)
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("caller refused by Decide: %d, want 407", resp.StatusCode)
	}
	f.callerErr = false
	f.failing = true
	resp, _ = f.client(goodKey).Get(up.URL)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("decisions down: %d, want 503", resp.StatusCode)
	}

	resp, err = http.Get(f.url.String() + "/not-a-proxy-request")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("origin-form request: %d, want 400", resp.StatusCode)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the upstream was reached %d times by refused requests", n)
	}
}

// A tunnel outlives the server's ReadTimeout (custody serves every
// listener with one): net/http clears the deadline it set for reading the
// CONNECT request when the connection is hijacked; this keeps it so.
func TestTunnelOutlivesReadTimeout(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err == nil {
			_, _ = c.Write(append([]byte("echo:"), buf...))
		}
	}()
	p := &Proxy{Dialer: loopbackAllowed,
		Authenticate: func(*http.Request) (Caller, error) { return Caller{Run: "r"}, nil },
		Decide:       func(context.Context, Caller, Request) (Decision, error) { return Decision{Allow: true}, nil },
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	defer srv.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := echo.Addr().String()
	_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	time.Sleep(500 * time.Millisecond) // past the server's ReadTimeout
	_, _ = io.WriteString(c, "ping")
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	got := make([]byte, 9)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "echo:ping" {
		t.Fatalf("through the tunnel after the timeout: %q %v", got, err)
	}
}
