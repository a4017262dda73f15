// Package tcpfwd copies TCP connections to a target, byte for byte: the
// harness's forwarders on the node's bridge (test/e2e/controlplane) and
// the forwarder pods' netprobe image use it. Standard library only, so
// the netprobe image stays one small static binary.
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

// Pipe dials target and copies both ways until both sides are done,
// passing half-closes on; then it closes both connections. If the dial
// fails, c is closed.
func Pipe(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, DialTimeout)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		closeWrite(up)
		close(done)
	}()
	_, _ = io.Copy(c, up)
	closeWrite(c)
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
