package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/policy"
)

// TestAttackResolveEveryDestination: serve builds the engine with
// Resolve: true, and Decide looks up every distinct public host in the
// arguments, one after another, each for up to ResolveTimeout (2 s). The
// arguments may name up to 10,000 strings under keys like "url", so one
// decide (any sandbox key; also the MCP proxy's and egress proxy's
// decisions) sends thousands of DNS queries to the cluster resolver and,
// with a name server that never answers (the attacker's own zone), holds
// its request for hours (10,000 x 2 s). The lookups a decision makes must
// be bounded: past a few, the call is ambiguous anyway.
func TestAttackResolveEveryDestination(t *testing.T) {
	var lookups atomic.Int64
	e, err := policy.New(policy.Options{Resolve: true, Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("a.yaml", []byte("rules:\n  - id: A-1\n    effect: allow\n    tool: WebFetch\n"))
	if err != nil {
		t.Fatal(err)
	}
	urls := make([]string, 5000)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://h%d.attacker-zone.com/", i)
	}
	args, _ := json.Marshal(map[string]any{"url": urls})
	d, err := e.Decide(context.Background(), p, policy.Call{Tool: "WebFetch", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if n := lookups.Load(); n > 256 {
		t.Errorf("one decision made %d DNS lookups (sequential, each up to ResolveTimeout): unbounded", n)
	}
	if d.Effect == policy.Allow {
		t.Errorf("a call naming 5000 hosts, most not resolved, was allowed (%+v): the hosts past the bound must be ambiguous (deny)", d)
	}
}

// TestResolveDecisionDeadline: with a name server that never answers,
// the lookups of one decision together end within twice ResolveTimeout
// (not ResolveTimeout per host), and the call is not allowed.
func TestResolveDecisionDeadline(t *testing.T) {
	const timeout = 50 * time.Millisecond
	e, err := policy.New(policy.Options{Resolve: true, ResolveTimeout: timeout, Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("a.yaml", []byte("rules:\n  - id: A-1\n    effect: allow\n    tool: WebFetch\n"))
	if err != nil {
		t.Fatal(err)
	}
	urls := make([]string, 16)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://h%d.silent-zone.com/", i)
	}
	args, _ := json.Marshal(map[string]any{"url": urls})
	start := time.Now()
	d, err := e.Decide(context.Background(), p, policy.Call{Tool: "WebFetch", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 8*timeout { // 16 lookups one after another: 16 timeouts
		t.Errorf("16 unanswered lookups took %v, want about 2 x ResolveTimeout (%v)", took, 2*timeout)
	}
	if d.Effect == policy.Allow {
		t.Errorf("a call whose hosts never resolved was allowed: %+v", d)
	}
}
