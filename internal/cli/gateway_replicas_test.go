package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
)

// tcpProxy forwards loopback TCP connections to target until cut: then
// every connection, open or new, becomes a black hole (bytes are read and
// dropped, nothing is answered, nothing is closed), as a network
// partition looks to the client. After restore, new connections are
// forwarded again; those open during the cut stay black holes.
type tcpProxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool

	mu    sync.Mutex
	conns []*proxied
	wg    sync.WaitGroup
}

type proxied struct {
	client, server net.Conn
	dead           atomic.Bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &tcpProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.client.Close()
			if c.server != nil {
				c.server.Close()
			}
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		pc := &proxied{client: c}
		if p.cut.Load() {
			pc.dead.Store(true)
		} else if pc.server, err = net.Dial("tcp", p.target); err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		p.wg.Add(1)
		go p.pipe(pc, c, pc.server)
		if pc.server != nil {
			p.wg.Add(1)
			go p.pipe(pc, pc.server, c)
		}
	}
}

// pipe copies from src to dst while pc is alive and drops what it reads
// once it is dead.
func (p *tcpProxy) pipe(pc *proxied, src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pc.dead.Load() && dst != nil {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !pc.dead.Load() && dst != nil {
				dst.Close()
			}
			return
		}
	}
}

// partition makes every connection, open or new, a black hole.
func (p *tcpProxy) partition() {
	p.cut.Store(true)
	p.mu.Lock()
	for _, c := range p.conns {
		c.dead.Store(true)
	}
	p.mu.Unlock()
}

// heal forwards new connections again.
func (p *tcpProxy) heal() { p.cut.Store(false) }

// viaProxy is dbURL with its host replaced by the proxy's address.
func viaProxy(t *testing.T, dbURL string) (*tcpProxy, string) {
	u, err := url.Parse(dbURL)
	must(t, err)
	p := newTCPProxy(t, u.Host)
	u.Host = p.addr()
	return p, u.String()
}

// gwCluster is gateway replicas on one PostgreSQL schema with a shared
// token key and a stand-in OpenAI-compatible upstream.
type gwCluster struct {
	*pgReplicas
	keysDir, provKeys string
	up                *httptest.Server
	upHandler         atomic.Pointer[http.HandlerFunc]
}

// gwReplica is a running replica with its gateway data port.
type gwReplica struct {
	replica
	gateway string
	stop    func()
}

func newGWCluster(t *testing.T) *gwCluster {
	c := &gwCluster{pgReplicas: newPGReplicas(t), keysDir: t.TempDir(), provKeys: t.TempDir()}
	must(t, os.WriteFile(filepath.Join(c.provKeys, "openai"), []byte("sk-real-openai-key"), 0o600))
	c.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := c.upHandler.Load(); h != nil {
			(*h)(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(c.up.Close)
	return c
}

// startGW runs replica name on db with the gateway on and extra flags.
func (c *gwCluster) startGW(name, db string, extra ...string) gwReplica {
	gw := freeAddr(c.t)
	args := append([]string{"--signer=false", "--gateway-listen=" + gw,
		"--gateway-signing-key=" + filepath.Join(c.keysDir, gateway.SigningKeyFile),
		"--gateway-keys-dir=" + c.provKeys, "--gateway-provider=openai=" + c.up.URL}, extra...)
	r, stop := c.startWith(name, c.keysDir, db, args...)
	waitHTTP(c.t, "http://"+gw+"/")
	return gwReplica{replica: r, gateway: gw, stop: stop}
}

// mint mints a gateway token for openai on r's admin plane.
func (c *gwCluster) mint(r gwReplica) gateway.MintResponse {
	c.t.Helper()
	st, body, _ := c.do("POST", "http://"+r.admin+"/v1/gateway/tokens", strings.Repeat("A", 40), `{"providers":["openai"],"ttl_seconds":3600}`)
	var m gateway.MintResponse
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &m) != nil {
		c.t.Fatalf("mint on %s = %d %s", r.admin, st, body)
	}
	return m
}

// revoke revokes jti on r's admin plane.
func (c *gwCluster) revoke(r gwReplica, jti string) {
	c.t.Helper()
	if st, body, _ := c.do("POST", "http://"+r.admin+"/v1/gateway/tokens/"+jti+"/revoke", strings.Repeat("A", 40), ""); st != http.StatusNoContent {
		c.t.Fatalf("revoke on %s = %d %s", r.admin, st, body)
	}
}

// call makes one model call through r's gateway and returns the status
// and body, or 0 and the error's text.
func (c *gwCluster) call(r gwReplica, tok string) (int, string, http.Header) {
	req, _ := http.NewRequest("POST", "http://"+r.gateway+"/openai/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestGatewayReplicaCutFromDatabaseFailsClosed: replica B loses
// PostgreSQL (a partition: its connections go silent) and a token is
// revoked on replica A. B cannot learn of the revocation, so once its
// view is older than --gateway-revocation-max-staleness it must refuse
// every request (503 "gateway revocation view is stale", Retry-After)
// and end its streams with that refusal as an in-stream error event; when the database is back it refuses the revoked
// token as revoked.
func TestGatewayReplicaCutFromDatabaseFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two replicas")
	}
	const bound = 2 * time.Second
	c := newGWCluster(t)
	proxy, dbB := viaProxy(t, c.db)
	a := c.startGW("a", c.db)
	b := c.startGW("b", dbB, "--gateway-revocation-max-staleness="+bound.String())
	m := c.mint(a)
	if st, body, _ := c.call(b, m.Token); st != 200 {
		t.Fatalf("B before the partition = %d %q", st, body)
	}

	// A stream in flight on B.
	streamDone := make(chan struct{})
	var streamOnce sync.Once
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: x\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		streamOnce.Do(func() { close(streamDone) })
	})
	c.upHandler.Store(&h)
	req, _ := http.NewRequest("POST", "http://"+b.gateway+"/openai/v1/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+m.Token)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "data: x\n" {
		t.Fatalf("stream's first line = %q", line)
	}
	clientEnd := make(chan string, 1)
	go func() { rest, _ := io.ReadAll(br); clientEnd <- string(rest) }()

	proxy.partition()
	cutAt := time.Now()
	c.revoke(a, m.JTI)
	streamCut := make(chan time.Duration, 1)
	go func() {
		<-streamDone
		streamCut <- time.Since(cutAt)
	}()
	c.upHandler.Store(nil)

	// Call B until it fails closed; no call may succeed past the bound
	// plus one poll.
	var failedClosed time.Duration
	var ok200 int
	for time.Since(cutAt) < bound+5*time.Second {
		st, body, hdr := c.call(b, m.Token)
		if st == 200 {
			ok200++
			if time.Since(cutAt) > bound+time.Second {
				t.Fatalf("B accepted the revoked token %v after the partition (bound %v)", time.Since(cutAt), bound)
			}
		}
		if st == http.StatusServiceUnavailable {
			if body != "gateway revocation view is stale\n" || hdr.Get("Retry-After") == "" {
				t.Fatalf("B's refusal = %d %q Retry-After %q", st, body, hdr.Get("Retry-After"))
			}
			failedClosed = time.Since(cutAt)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if failedClosed == 0 {
		t.Fatalf("B did not fail closed within %v of the partition", bound+5*time.Second)
	}
	select {
	case d := <-streamCut:
		t.Logf("B failed closed %v after losing PostgreSQL (bound %v; %d calls got 200 before); its stream was cut after %v",
			failedClosed.Round(time.Millisecond), bound, ok200, d.Round(time.Millisecond))
	case <-time.After(2 * time.Second):
		t.Fatal("B's stream still open after B failed closed")
	}
	// The stream ends with the provider's own in-stream error event (an
	// OpenAI-shaped error here) carrying the refusal, so SDKs raise it.
	if rest := <-clientEnd; !strings.Contains(rest, `"error"`) || !strings.Contains(rest, "gateway revocation view is stale") {
		t.Errorf("B's stream ended with %q; want an in-stream error event carrying gateway revocation view is stale", rest)
	}
	if st, body, _ := c.do("GET", "http://"+b.metrics+"/readyz", "", ""); st != http.StatusServiceUnavailable || !strings.Contains(body, "gateway_revocations") {
		t.Errorf("B's /readyz while stale = %d %s; want 503 naming gateway_revocations", st, body)
	}

	proxy.heal()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, body, _ := c.call(b, m.Token)
		if st == http.StatusUnauthorized && body == "gateway token revoked\n" {
			break
		}
		if st == 200 || time.Now().After(deadline) {
			t.Fatalf("B after the database came back = %d %q, want 401 gateway token revoked", st, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A live token works again on B.
	if st, body, _ := c.call(b, c.mint(a).Token); st != 200 {
		t.Errorf("B, a fresh token after the database came back = %d %q", st, body)
	}
}

// TestGatewayRevocationCrossReplica revokes 200 tokens, one at a time,
// on replica A and measures how long replica B keeps accepting each
// after A answered the revoke (B's calls are back to back). Every
// revocation must reach B well within B's staleness bound; the
// distribution is logged.
func TestGatewayRevocationCrossReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two replicas and 200 revocations")
	}
	const n = 200
	c := newGWCluster(t)
	a := c.startGW("a", c.db)
	b := c.startGW("b", c.db)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		m := c.mint(a)
		if st, body, _ := c.call(b, m.Token); st != 200 {
			t.Fatalf("token %d on B before revocation = %d %q", i, st, body)
		}
		c.revoke(a, m.JTI)
		revoked := time.Now()
		for {
			st, body, _ := c.call(b, m.Token)
			if st == http.StatusUnauthorized && body == "gateway token revoked\n" {
				break
			}
			if st != 200 || time.Since(revoked) > 5*time.Second {
				t.Fatalf("token %d on B %v after revocation = %d %q", i, time.Since(revoked), st, body)
			}
		}
		lat = append(lat, time.Since(revoked))
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(n-1))].Round(100 * time.Microsecond) }
	t.Logf("cross-replica revocation over %d: p50 %v, p90 %v, p99 %v, max %v", n, q(0.5), q(0.9), q(0.99), lat[n-1].Round(100*time.Microsecond))
}

// TestGatewayTokenMintedOnOtherReplica: a token minted on replica A is
// accepted on replica B (its jti is found in the shared store); one
// signed with the shared key but never minted is refused on both.
func TestGatewayTokenMintedOnOtherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two replicas")
	}
	c := newGWCluster(t)
	a := c.startGW("a", c.db)
	b := c.startGW("b", c.db)
	m := c.mint(a)
	if st, body, _ := c.call(b, m.Token); st != 200 {
		t.Errorf("B, token minted on A = %d %q, want 200", st, body)
	}
	key, err := gateway.LoadOrCreateSigningKey(filepath.Join(c.keysDir, gateway.SigningKeyFile))
	must(t, err)
	iss, err := gateway.NewIssuer(gateway.TokenConfig{}, key, nil)
	must(t, err)
	forged, _, err := iss.Mint(gateway.Grant{Providers: []string{"openai"}, TTL: time.Hour}) // signed, never recorded
	must(t, err)
	for _, r := range []gwReplica{a, b} {
		if st, body, _ := c.call(r, forged); st != http.StatusUnauthorized || body != "invalid gateway token: not minted by this gateway\n" {
			t.Errorf("%s, token signed with the leaked key = %d %q, want 401 not minted", r.gateway, st, body)
		}
	}
}
