package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/policy"
)

// listen returns a loopback listener that counts accepted connections.
func listen(t *testing.T) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln, &n
}

func wantDenied(t *testing.T, err error, kind policy.Kind, rule string) *DeniedError {
	t.Helper()
	var de *DeniedError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want a *DeniedError", err)
	}
	if de.Kind != kind || de.Rule != rule {
		t.Errorf("denied %s as %s/%s, want %s/%s", de.Addr, de.Kind, de.Rule, kind, rule)
	}
	return de
}

// A loopback listener is refused by IP, by a name that resolves to it
// (localhost, from /etc/hosts: the check is on the dialled address, not
// the name) and by its IPv4-mapped IPv6 form; nothing reaches it. Allowed
// by an operator prefix, the same dial connects: the rule, not the path,
// refused it.
func TestLoopbackRefusedAtDialTime(t *testing.T) {
	ln, accepted := listen(t)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx := context.Background()
	d := &Dialer{Timeout: 2 * time.Second}
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::ffff:127.0.0.1]:" + port} {
		c, err := d.DialContext(ctx, "tcp", addr)
		if c != nil {
			c.Close()
		}
		wantDenied(t, err, policy.KindLoopback, RuleInternal)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the listener accepted %d refused connections", n)
	}
	allow := &Dialer{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	c, err := allow.DialContext(ctx, "tcp", "localhost:"+port)
	if err != nil {
		t.Fatalf("allow-listed dial: %v", err)
	}
	c.Close()
}

// Internal and metadata addresses in several notations are refused before
// connect(2), so nothing is sent to them (these are never reachable from
// a test anyway: the refusal must come from the check, within the
// deadline, naming the kind).
func TestInternalAddressesRefused(t *testing.T) {
	d := &Dialer{Timeout: 2 * time.Second}
	for _, tc := range []struct {
		addr string
		kind policy.Kind
		rule string
	}{
		{"169.254.169.254:80", policy.KindMetadata, RuleMetadata},
		{"[fd00:ec2::254]:80", policy.KindMetadata, RuleMetadata},
		{"[::ffff:169.254.169.254]:80", policy.KindMetadata, RuleMetadata},
		{"[64:ff9b::a9fe:a9fe]:80", policy.KindMetadata, RuleMetadata},
		{"10.1.2.3:443", policy.KindPrivate, RuleInternal},
		{"100.64.0.1:443", policy.KindCGNAT, RuleInternal},
		{"[fe80::1]:443", policy.KindLinkLocal, RuleInternal},
		{"0.0.0.0:443", policy.KindUnspecified, RuleInternal},
		{"224.0.0.1:443", policy.KindMulticast, RuleInternal},
	} {
		start := time.Now()
		c, err := d.DialContext(context.Background(), "tcp", tc.addr)
		if c != nil {
			c.Close()
		}
		de := wantDenied(t, err, tc.kind, tc.rule)
		if time.Since(start) > time.Second {
			t.Errorf("%s: refusal took %s; the check must run before connect", tc.addr, time.Since(start))
		}
		if de.Error() == "" {
			t.Errorf("%s: empty error text", tc.addr)
		}
	}
}

// Only TCP is dialled.
func TestNetworkRefused(t *testing.T) {
	if _, err := (&Dialer{}).DialContext(context.Background(), "udp", "127.0.0.1:53"); err == nil {
		t.Fatal("udp was dialled")
	}
}
