package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// connectAll tells a listening port, a closed port and a name that does
// not resolve apart, in argument order, all on loopback.
func TestConnectAll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	out := connectAll([]string{ln.Addr().String(), closedAddr, "no-such-host.invalid:1"}, 2*time.Second)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines, got %q", out)
	}
	for i, want := range []string{ln.Addr().String() + " connected", closedAddr + " refused", "no-such-host.invalid:1 error"} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
}
