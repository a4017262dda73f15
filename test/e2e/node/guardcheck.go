package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// guardNetnsPrefix names the throwaway namespaces of [VerifyGuard];
// Teardown deletes any left by a crash.
const guardNetnsPrefix = "custody-gt-"

// GuardProof is what [VerifyGuard] observed, in TCP SYNs to port 80
// arriving at the outside stand-in.
type GuardProof struct {
	// Canary is the count without the guard: it must be > 0, or the
	// check could not fail.
	Canary int
	// Guarded is the count with the guard for the same probes (pod to an
	// outside address, host to a ClusterIP and to a pod CIDR address
	// with no route on the bridge): 0 when the guard holds.
	Guarded int
	// Dropped are the guard's rule counters (forward, output), in packets.
	Dropped [2]int
}

// VerifyGuard proves GuardRuleset on this kernel without sending anything
// off the machine: in three throwaway network namespaces (a router with
// "eth0" and cni0, a pod on the bridge, and an outside stand-in at the
// far end of the router's eth0 veth) it counts TCP SYNs arriving outside,
// first without the guard (the canary), then with it. The host's own
// namespaces, tables and sysctls are not touched. Needs root, ip, nft and
// socat.
func VerifyGuard(ctx context.Context, progress io.Writer) (p GuardProof, err error) {
	if progress == nil {
		progress = io.Discard
	}
	r, pod, out := guardNetnsPrefix+"router", guardNetnsPrefix+"pod", guardNetnsPrefix+"outside"
	deleteGuardNetns(ctx)
	defer deleteGuardNetns(context.WithoutCancel(ctx))
	ip := func(args ...string) error {
		if err != nil {
			return err
		}
		_, err = run(ctx, "ip", args...)
		return err
	}
	ip("netns", "add", r)
	ip("netns", "add", pod)
	ip("netns", "add", out)
	ip("-n", r, "link", "add", "eth0", "type", "veth", "peer", "name", "up0", "netns", out)
	ip("-n", out, "link", "set", "up0", "up")
	ip("-n", r, "addr", "add", "192.0.2.2/24", "dev", "eth0")
	ip("-n", r, "link", "set", "eth0", "up")
	ip("-n", r, "route", "add", "default", "via", "192.0.2.1", "dev", "eth0")
	ip("-n", r, "neigh", "add", "192.0.2.1", "lladdr", "02:00:00:00:00:01", "dev", "eth0", "nud", "permanent")
	ip("-n", r, "link", "add", Bridge, "type", "bridge")
	ip("-n", r, "addr", "add", BridgeIP+"/24", "dev", Bridge)
	ip("-n", r, "link", "set", Bridge, "up")
	ip("-n", r, "link", "add", "vethgt", "type", "veth", "peer", "name", "eth0", "netns", pod)
	ip("-n", r, "link", "set", "vethgt", "master", Bridge, "up")
	ip("-n", pod, "addr", "add", "10.244.0.50/24", "dev", "eth0")
	ip("-n", pod, "link", "set", "eth0", "up")
	ip("-n", pod, "route", "add", "default", "via", BridgeIP)
	if err != nil {
		return p, fmt.Errorf("node: verify guard: %w", err)
	}
	// ip_forward is per network namespace: this is the router's only.
	if _, err := run(ctx, "ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return p, fmt.Errorf("node: verify guard: %w", err)
	}
	if _, err := runIn(ctx, `table netdev outside {
	chain in {
		type filter hook ingress device "up0" priority 0;
		tcp dport 80 tcp flags syn counter
	}
}
`, "ip", "netns", "exec", out, "nft", "-f", "-"); err != nil {
		return p, fmt.Errorf("node: verify guard: %w", err)
	}
	probes := [][2]string{{pod, "198.51.100.7"}, {r, "10.0.0.10"}, {r, "10.244.1.9"}}
	send := func() {
		var wg sync.WaitGroup
		for _, pr := range probes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Nothing answers: each probe is a SYN (and retries) for 1 s.
				_, _ = run(ctx, "ip", "netns", "exec", pr[0], "socat", "-T1", "/dev/null", "TCP:"+pr[1]+":80,connect-timeout=1")
			}()
		}
		wg.Wait()
	}
	arrived := func() (int, error) {
		b, err := run(ctx, "ip", "netns", "exec", out, "nft", "list", "table", "netdev", "outside")
		if err != nil {
			return 0, err
		}
		return packets(string(b))[0], nil
	}
	send()
	if p.Canary, err = arrived(); err != nil || p.Canary == 0 {
		return p, fmt.Errorf("node: verify guard: the canary saw %d SYNs outside (%v): the check cannot fail", p.Canary, err)
	}
	fmt.Fprintf(progress, "node: guard check: without the guard %d SYNs reached the outside stand-in\n", p.Canary)
	rules, err := GuardRuleset([]string{"eth0"})
	if err != nil {
		return p, err
	}
	if _, err := runIn(ctx, rules, "ip", "netns", "exec", r, "nft", "-f", "-"); err != nil {
		return p, fmt.Errorf("node: verify guard: %w", err)
	}
	send()
	after, err := arrived()
	if err != nil {
		return p, err
	}
	p.Guarded = after - p.Canary
	b, err := run(ctx, "ip", "netns", "exec", r, "nft", "list", "table", "inet", GuardTable)
	if err != nil {
		return p, err
	}
	if c := packets(string(b)); len(c) == 2 {
		p.Dropped = [2]int{c[0], c[1]}
	}
	fmt.Fprintf(progress, "node: guard check: with the guard %d SYNs reached it; the guard dropped %d forwarded, %d host output\n", p.Guarded, p.Dropped[0], p.Dropped[1])
	if p.Guarded != 0 || p.Dropped[0] == 0 || p.Dropped[1] == 0 {
		return p, errors.New("node: verify guard: the guard let traffic out")
	}
	return p, nil
}

// packets returns every "counter packets N" value in an nft listing.
func packets(listing string) []int {
	var out []int
	f := strings.Fields(listing)
	for i := 0; i+2 < len(f); i++ {
		if f[i] == "counter" && f[i+1] == "packets" {
			n, _ := strconv.Atoi(f[i+2])
			out = append(out, n)
		}
	}
	return out
}

func deleteGuardNetns(ctx context.Context) {
	ents, _ := os.ReadDir(netnsDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), guardNetnsPrefix) {
			_, _ = run(ctx, "ip", "netns", "del", e.Name())
		}
	}
}
