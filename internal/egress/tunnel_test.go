package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// A tunnel ends with the credential that opened it (Caller.Bind: the
// gateway cuts a revoked token's tunnels as it cuts its streams), and at
// MaxTunnel in any case.
func TestTunnelEndsWithItsCredential(t *testing.T) {
	ln := echoServer(t)
	credential, revoke := context.WithCancel(context.Background())
	defer revoke()
	p := &Proxy{
		Dialer: loopbackAllowed,
		Authenticate: func(r *http.Request) (Caller, error) {
			return Caller{Identity: apikey.Identity{Tenant: "agents", Agent: "a"}, Run: "r1",
				Bind: func(ctx context.Context) (context.Context, func()) {
					b, cancel := context.WithCancel(ctx)
					stop := context.AfterFunc(credential, cancel)
					return b, func() { stop(); cancel() }
				}}, nil
		},
		Decide: func(context.Context, Caller, Request) (Decision, error) {
			return Decision{Allow: true, CallID: "c1"}, nil
		},
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	c, br := openTunnel(t, srv.Listener.Addr().String(), ln.Addr().String(), "k")
	defer c.Close()
	if got, err := echoOnce(c, br, "before"); err != nil || got != "before\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	revoke()
	time.Sleep(100 * time.Millisecond)
	if got, err := echoOnce(c, br, "after"); err == nil && got == "after\n" {
		t.Fatal("the tunnel still carries bytes after its credential was revoked")
	}

	// A proxy of its own: the first one's handlers may still read theirs.
	short := &Proxy{Dialer: loopbackAllowed, MaxTunnel: 300 * time.Millisecond, Decide: p.Decide,
		Authenticate: func(*http.Request) (Caller, error) {
			return Caller{Identity: apikey.Identity{Tenant: "agents", Agent: "a"}, Run: "r1"}, nil
		}}
	srv2 := httptest.NewServer(short)
	defer srv2.Close()
	c2, br2 := openTunnel(t, srv2.Listener.Addr().String(), ln.Addr().String(), "k")
	defer c2.Close()
	if got, err := echoOnce(c2, br2, "young"); err != nil || got != "young\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	time.Sleep(500 * time.Millisecond)
	if got, err := echoOnce(c2, br2, "old"); err == nil && got == "old\n" {
		t.Fatal("the tunnel outlived MaxTunnel")
	}
}

// One agent holds at most MaxPerCaller requests and tunnels: the next is
// refused 429 (another agent is not affected) until one ends.
func TestPerCallerBound(t *testing.T) {
	ln := echoServer(t)
	p := &Proxy{
		Dialer:       loopbackAllowed,
		MaxPerCaller: 2,
		Authenticate: func(r *http.Request) (Caller, error) {
			agent := "a"
			if strings.Contains(r.Header.Get("Proxy-Authorization"), base64.StdEncoding.EncodeToString([]byte("x:other"))) {
				agent = "b"
			}
			return Caller{Identity: apikey.Identity{Tenant: "agents", Agent: agent}, Run: "r1"}, nil
		},
		Decide: func(context.Context, Caller, Request) (Decision, error) {
			return Decision{Allow: true, CallID: "c1"}, nil
		},
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	addr, target := srv.Listener.Addr().String(), ln.Addr().String()
	c1, _ := openTunnel(t, addr, target, "k")
	c2, _ := openTunnel(t, addr, target, "k")
	defer c2.Close()
	status := func(key string) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		auth := base64.StdEncoding.EncodeToString([]byte("x:" + key))
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line)
	}
	if got := status("k"); !strings.HasPrefix(got, "HTTP/1.1 429") {
		t.Fatalf("third tunnel of one agent: %q, want 429", got)
	}
	if got := status("other"); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("another agent: %q, want 200", got)
	}
	c1.Close()
	deadline := time.Now().Add(5 * time.Second)
	for got := status("k"); !strings.HasPrefix(got, "HTTP/1.1 200"); got = status("k") {
		if time.Now().After(deadline) {
			t.Fatalf("after one tunnel closed: %q, want 200", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
