// Package tcpfwd copies TCP connections both ways, byte for byte: the
// egress proxy's CONNECT tunnels (internal/egress), and in the test
// harness the forwarders on the node's bridge (test/e2e/controlplane) and
// the forwarder pods' netprobe image. Standard library only, so the
// netprobe image stays one small static binary.
package tcpfwd

import (
	"io"
	"net"
	"time"
)

// DialTimeout bounds each upstream dial, so a target that drops SYNs
// does not hold a goroutine for the kernel's SYN timeout.
const DialTimeout = 5 * time.Second

// Serve accepts connections on ln and pipes each to target (host:port)
// until ln is closed. When allow is not nil, a connection whose source
// address it refuses is closed at once. It returns when Accept fails.
func Serve(ln net.Listener, target string, allow func(net.IP) bool) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if allow != nil {
			a, ok := c.RemoteAddr().(*net.TCPAddr)
			if !ok || !allow(a.IP) {
				_ = c.Close()
				continue
			}
		}
		go Pipe(c, target)
	}
}

// Pipe dials target and [Join]s c with it; if the dial fails, c is
// closed.
func Pipe(c net.Conn, target string) {
	up, err := net.DialTimeout("tcp", target, DialTimeout)
	if err != nil {
		c.Close()
		return
	}
	Join(c, up)
}

// Join copies a to b and b to a until both directions end, passing each
// half-close on, then closes both. A side that cannot half-close (a
// listener's wrapper hiding *net.TCPConn's CloseWrite) is closed when
// the other side's direction ends, so that its peer sees the end
// rather than waiting for it.
func Join(a, b net.Conn) {
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(b, a)
		closeWrite(b)
		close(done)
	}()
	_, _ = io.Copy(a, b)
	closeWrite(a)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
