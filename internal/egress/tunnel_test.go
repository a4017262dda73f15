package egress

import (
	"context"
	"net/http"
	"net/http/httptest"
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

	p.MaxTunnel = 300 * time.Millisecond
	credential, revoke = context.WithCancel(context.Background())
	defer revoke()
	c2, br2 := openTunnel(t, srv.Listener.Addr().String(), ln.Addr().String(), "k")
	defer c2.Close()
	if got, err := echoOnce(c2, br2, "young"); err != nil || got != "young\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	time.Sleep(500 * time.Millisecond)
	if got, err := echoOnce(c2, br2, "old"); err == nil && got == "old\n" {
		t.Fatal("the tunnel outlived MaxTunnel")
	}
}
