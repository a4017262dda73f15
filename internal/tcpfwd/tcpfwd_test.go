package tcpfwd

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// Serve pipes an allowed client both ways, passing the half-close on,
// and closes a refused one at once without dialling the target.
func TestServe(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	dialled := make(chan struct{}, 2)
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			dialled <- struct{}{}
			b, _ := io.ReadAll(c)
			_, _ = c.Write(append([]byte("echo:"), b...))
			c.Close()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var refuse atomic.Bool
	go func() { _ = Serve(ln, echo.Addr().String(), func(net.IP) bool { return !refuse.Load() }) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("hi"))
	_ = c.(*net.TCPConn).CloseWrite()
	if got, _ := io.ReadAll(c); string(got) != "echo:hi" {
		t.Errorf("allowed client got %q", got)
	}
	<-dialled

	refuse.Store(true)
	c, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(c); len(got) != 0 {
		t.Errorf("refused client got %q", got)
	}
	select {
	case <-dialled:
		t.Error("a refused client made the forwarder dial the target")
	default:
	}
}
