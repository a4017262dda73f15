package main

import (
	"io"
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
	for i, want := range []string{ln.Addr().String() + " connected", closedAddr + " refused", "no-such-host.invalid:1 unresolved"} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
}

// forward carries bytes both ways and passes the half-close on.
func TestForward(t *testing.T) {
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
		b, _ := io.ReadAll(c)
		_, _ = c.Write(append([]byte("echo:"), b...))
		c.Close()
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go forward(addr, echo.Addr().String())
	var c net.Conn
	for i := 0; i < 50; i++ {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("hi"))
	_ = c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	if string(got) != "echo:hi" {
		t.Errorf("got %q", got)
	}
}
