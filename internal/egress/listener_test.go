package egress_test

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/egress"
)

func TestLimitBySource(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	ln := egress.LimitBySource(raw, 3, &refused)
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var held []net.Conn
	for range 3 {
		dial()
		held = append(held, <-accepted)
	}
	// The fourth from the same address is closed at once.
	over := dial()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection over the cap: read err = %v, want EOF (closed by the listener)", err)
	}
	if refused.Load() != 1 {
		t.Errorf("refused = %d, want 1", refused.Load())
	}
	// Closing one (server side, as the HTTP server does) makes room.
	held[0].Close()
	held[0].Close() // a second Close releases nothing more
	dial()
	select {
	case c := <-accepted:
		held[0] = c
	case <-time.After(5 * time.Second):
		t.Fatal("a connection after one closed was not accepted")
	}
	over = dial()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("over the cap again: read err = %v, want EOF", err)
	}
	for _, c := range held {
		c.Close()
	}
}
