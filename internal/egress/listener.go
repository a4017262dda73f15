package egress

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// DefaultMaxConnsPerSource is [LimitBySource]'s usual cap: twice a
// caller's MaxPerCaller, so one sandbox (one pod address) can use all of
// its requests while connections it leaves unauthenticated or idle cannot
// fill the listener for the others.
const DefaultMaxConnsPerSource = 128

// LimitBySource returns a listener that holds at most n open connections
// per source address and closes, right after accepting it, each
// connection over that cap. Proxy.MaxPerCaller counts requests in
// progress per caller once authenticated; this bounds what comes before
// (connections that never authenticate, or sit idle) per pod. An IPv6
// source is counted by its address too, not its /64: a Kubernetes
// node's pods share one /64 (its pod CIDR), and a pod cannot add
// addresses to its own. Behind SNAT, where many sandboxes share one
// source address, raise n accordingly. refused, if not nil, is
// incremented per connection closed. n must be positive.
func LimitBySource(ln net.Listener, n int, refused *atomic.Int64) net.Listener {
	return &sourceLimited{Listener: ln, max: n, open: map[netip.Addr]int{}, refused: refused}
}

type sourceLimited struct {
	net.Listener
	max     int
	refused *atomic.Int64

	mu   sync.Mutex
	open map[netip.Addr]int
}

func (l *sourceLimited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceAddr(c.RemoteAddr())
		l.mu.Lock()
		if l.open[src] >= l.max {
			l.mu.Unlock()
			// Counted before the close, so that a client seeing its
			// connection closed finds it counted.
			if l.refused != nil {
				l.refused.Add(1)
			}
			c.Close()
			continue
		}
		l.open[src]++
		l.mu.Unlock()
		return &sourceConn{Conn: c, release: func() { l.release(src) }}, nil
	}
}

func (l *sourceLimited) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src]--; l.open[src] <= 0 {
		delete(l.open, src)
	}
}

// sourceAddr is the address a connection is counted under: its source
// address, IPv4-mapped IPv6 as IPv4, without a zone (the zero Addr for a
// source that is not ip:port).
func sourceAddr(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

type sourceConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *sourceConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
