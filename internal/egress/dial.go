package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/agentcustody/custody/internal/policy"
)

// Rule ids of the built-in destination rules (internal/policy).
const (
	RuleMetadata = "CUSTODY-NET-METADATA"
	RuleInternal = "CUSTODY-NET-INTERNAL"
)

// DeniedError is a dial refused by the destination rules.
type DeniedError struct {
	// Addr is the address the dialer was about to connect to
	// (resolved; host:port).
	Addr string
	// Kind is its class (policy.Kind), e.g. "loopback".
	Kind policy.Kind
	// Rule is the rule id that refused it.
	Rule string
	// Reason is the classifier's reason (e.g. "IPv4-mapped; 127.0.0.0/8").
	Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("egress: %s refused: %s destination (%s)", e.Addr, e.Kind, e.Rule)
}

// Dialer dials TCP to allowed addresses only (see the package doc).
// The zero value is ready to use.
type Dialer struct {
	// AllowPrefixes are address ranges allowed whatever their kind (an
	// operator's internal services). Default none.
	AllowPrefixes []netip.Prefix
	// Timeout bounds each dial, DNS included. Default 10 s.
	Timeout time.Duration
	// Resolver resolves names. Default net.DefaultResolver.
	Resolver *net.Resolver
}

// DialContext connects to addr (host:port; host a name or an IP literal)
// over network (tcp, tcp4 or tcp6). Errors: *DeniedError when every
// address the name resolved to is refused (the first refusal is
// returned), or the dial's own error.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("egress: network %q refused: only tcp", network)
	}
	timeout := d.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	// Control runs once per address tried, concurrently for the two
	// families under happy eyeballs.
	var mu sync.Mutex
	var denied *DeniedError
	nd := &net.Dialer{
		Timeout:  timeout,
		Resolver: d.Resolver,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			err := d.check(address)
			var de *DeniedError
			if errors.As(err, &de) {
				mu.Lock()
				if denied == nil {
					denied = de
				}
				mu.Unlock()
			}
			return err
		},
	}
	c, err := nd.DialContext(ctx, network, addr)
	mu.Lock()
	defer mu.Unlock()
	if err != nil && denied != nil {
		return nil, denied
	}
	return c, err
}

// check decides one resolved address (ip:port).
func (d *Dialer) check(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("egress: address %q: %w", address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("egress: address %q is not an IP: %w", address, err)
	}
	ip = ip.WithZone("")
	for _, p := range d.AllowPrefixes {
		if p.Contains(ip.Unmap()) || p.Contains(ip) {
			return nil
		}
	}
	dest := policy.ClassifyIP(ip)
	if dest.Kind == policy.KindPublic {
		return nil
	}
	rule := RuleInternal
	if dest.Kind == policy.KindMetadata {
		rule = RuleMetadata
	}
	return &DeniedError{Addr: address, Kind: dest.Kind, Rule: rule, Reason: dest.Reason}
}
