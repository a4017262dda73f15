package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/signer"
)

// addrCatcher is a slog handler that picks the "addr" of the
// "listening" line.
type addrCatcher struct {
	mu   sync.Mutex
	addr string
}

func (a *addrCatcher) Enabled(context.Context, slog.Level) bool { return true }
func (a *addrCatcher) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "listening" {
		r.Attrs(func(at slog.Attr) bool {
			if at.Key == "addr" {
				a.mu.Lock()
				a.addr = at.Value.String()
				a.mu.Unlock()
			}
			return true
		})
	}
	return nil
}
func (a *addrCatcher) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a *addrCatcher) WithGroup(string) slog.Handler      { return a }

// TestAttackEgressListenerStarvation: runServers caps the egress
// listener at 256 connections (namedServer.maxConns: the default case,
// meant for admin and metrics) for every sandbox of every tenant
// together, and the egress proxy has no per-caller bound. One sandbox
// holding 256 requests — CONNECT tunnels it keeps open, requests
// decided ask (held up to --proxy-approval-wait, 60 s), or merely
// unauthenticated connections trickling headers (10 s each, renewed) —
// leaves every other sandbox's egress hanging in the accept queue. The
// handler here blocks as a request waiting for an approval does.
func TestAttackEgressListenerStarvation(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Victim") != "" {
			w.WriteHeader(204)
			return
		}
		<-release // an ask waiting for an operator, or a tunnel in use
	})
	cat := &addrCatcher{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServers(ctx, []*namedServer{{name: "egress", addr: "127.0.0.1:0", handler: h}}, time.Minute, slog.New(cat))
	}()
	defer func() { close(release); cancel(); <-done }()
	var addr string
	for i := 0; i < 100 && addr == ""; i++ {
		time.Sleep(10 * time.Millisecond)
		cat.mu.Lock()
		addr = cat.addr
		cat.mu.Unlock()
	}
	if addr == "" {
		t.Fatal("no listener address")
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 256 { // one sandbox
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
		conns = append(conns, c)
	}
	time.Sleep(200 * time.Millisecond)
	// Another tenant's sandbox.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Victim: 1\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "204") {
		t.Fatalf("another sandbox's request: %q, %v — the egress listener is held by one caller", line, err)
	}
}

// keyTunnel is a tunnel's context for run admitted with a fresh key of
// agents/a through the egress proxy's Authenticate and Bind; it fails the
// test if the context ends within a recheck while nothing happened.
func keyTunnel(t *testing.T, e *signerEnv, run string) (context.Context, func()) {
	t.Helper()
	id := apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"}
	minted, err := e.keys.Mint(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := newEgressProxy(e.keys, nil, func() *signer.Signer { return e.s }, time.Second, e.log)
	r := httptest.NewRequest("CONNECT", "http://example.com:443", nil)
	r.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(run+":"+minted.Key)))
	c, err := p.Authenticate(r)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bind == nil {
		t.Fatal("a caller admitted with a custody key has no Bind: revoking the key leaves its tunnels open")
	}
	bctx, release := c.Bind(context.Background())
	select {
	case <-bctx.Done():
		t.Fatalf("bound context ended by itself: %v", context.Cause(bctx))
	case <-time.After(keyRecheck + 500*time.Millisecond):
	}
	return bctx, release
}

// wantCut waits for bctx to end with cause want.
func wantCut(t *testing.T, bctx context.Context, want error) {
	t.Helper()
	select {
	case <-bctx.Done():
		if !errors.Is(context.Cause(bctx), want) {
			t.Errorf("cause %v, want %v", context.Cause(bctx), want)
		}
	case <-time.After(2*keyRecheck + time.Second):
		t.Fatalf("the tunnel goes on; want it cut (%v)", want)
	}
}

// TestAttackEgressRevokedKeyKeepsTunnel: a tunnel admitted with a
// gateway token is cut when the token is revoked (Caller.Bind), but one
// admitted with a custody key had no Bind: revoking the key (the
// sandbox is compromised: RevokeAgent) left every tunnel it opened up
// for MaxTunnel (an hour), deciding nothing more.
func TestAttackEgressRevokedKeyKeepsTunnel(t *testing.T) {
	e := newSignerEnv(t, "")
	bctx, release := keyTunnel(t, e, "run")
	defer release()
	if _, err := e.keys.RevokeAgent(context.Background(), "agents", "a"); err != nil {
		t.Fatal(err)
	}
	wantCut(t, bctx, apikey.ErrRevoked)
}

// TestAttackEgressKeyTunnelOutlivesRun: a tunnel admitted with a custody
// key went on after its run closed, unrecorded, for up to MaxTunnel.
func TestAttackEgressKeyTunnelOutlivesRun(t *testing.T) {
	ctx := context.Background()
	e := newSignerEnv(t, "")
	id := apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"}
	run, err := e.s.Register(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	bctx, release := keyTunnel(t, e, run.Run)
	defer release()
	if _, err := e.s.CloseRun(ctx, id, run.Run); err != nil {
		t.Fatal(err)
	}
	wantCut(t, bctx, signer.ErrRunClosed)
}
