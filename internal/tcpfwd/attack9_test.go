package tcpfwd

import (
	"io"
	"net"
	"testing"
	"time"
)

// plainConn hides *net.TCPConn's CloseWrite, as the listener wrappers
// custody serves the egress proxy under do (egress.LimitBySource,
// netutil.LimitListener).
type plainConn struct{ net.Conn }

// TestAttack9JoinWithoutCloseWrite: when one side cannot half-close,
// Join could not pass the other side's end on: the peer behind it never
// saw EOF and the join (a tunnel, one of an agent's slots) lived until
// something else closed it. Without CloseWrite the side is closed.
func TestAttack9JoinWithoutCloseWrite(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "bye")
		c.Close()
	}()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	joined := make(chan struct{})
	go func() {
		defer close(joined)
		c, err := front.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", up.Addr().String())
		if err != nil {
			c.Close()
			return
		}
		Join(plainConn{c}, b)
	}()
	c, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if got, err := io.ReadAll(c); string(got) != "bye" || err != nil {
		t.Fatalf("read %q, %v: want \"bye\" then EOF", got, err)
	}
	select {
	case <-joined:
	case <-time.After(3 * time.Second):
		t.Fatal("Join still running after both ends closed")
	}
}
