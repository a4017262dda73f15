package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// dial reports success only when the peer says "ok": a port that accepts
// but says something else, and a closed port, are both failures.
func TestDial(t *testing.T) {
	serveOnce := func(reply string) string {
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
				_, _ = c.Write([]byte(reply))
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	if msg, code := dial(serveOnce("ok\n"), time.Second); code != 0 || !strings.Contains(msg, "read ok") {
		t.Errorf("ok server: %d %q", code, msg)
	}
	if msg, code := dial(serveOnce("nope\n"), time.Second); code != 1 || !strings.Contains(msg, `read "nope\n"`) {
		t.Errorf("wrong reply: %d %q", code, msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if msg, code := dial(closed, time.Second); code != 1 || !strings.Contains(msg, "failed") {
		t.Errorf("closed port: %d %q", code, msg)
	}
}

// Only a name /etc/hosts answers: a test must not send a DNS query off
// this machine.
func TestLookup(t *testing.T) {
	if msg, code := lookup("localhost", time.Second); code != 0 || !strings.Contains(msg, "127.0.0.1") {
		t.Errorf("localhost: %d %q", code, msg)
	}
}
