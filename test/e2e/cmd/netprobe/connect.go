package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// connectAll attempts a TCP handshake with every address at once, each
// within timeout, and returns one line per address in argument order:
//
//	ADDR connected|refused|timeout|unresolved|error DETAIL
//
// "connected" means the handshake completed (nothing is read or written);
// "refused" that a RST came back (the path is open, nothing listens);
// "timeout" that no answer came (a policy drop looks like this);
// "unresolved" that the name did not resolve (no verdict on the path:
// a DNS hiccup must not read as a policy block); "error" anything else,
// e.g. no route to host. A new pod's
// first SYN can be dropped while the policy agent learns its address;
// the kernel retransmits it at 1 s and 3 s, so use a timeout of 4 s or
// more for a verdict.
func connectAll(addrs []string, timeout time.Duration) string {
	lines := make([]string, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines[i] = a + " " + connect(a, timeout)
		}()
	}
	wg.Wait()
	return strings.Join(lines, "\n") + "\n"
}

func connect(addr string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	took := time.Since(start).Round(time.Millisecond)
	if err == nil {
		remote := c.RemoteAddr().String()
		c.Close()
		return fmt.Sprintf("connected to %s in %s", remote, took)
	}
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("refused after %s", took)
	case errors.As(err, &dns):
		return fmt.Sprintf("unresolved after %s: %v", took, err)
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return fmt.Sprintf("timeout after %s", took)
	default:
		return fmt.Sprintf("error after %s: %v", took, err)
	}
}
