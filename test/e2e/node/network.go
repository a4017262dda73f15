package node

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/template"
)

// The node's fixed addresses. The service CIDR is the control plane's
// --service-cluster-ip-range.
const (
	// Bridge is the CNI bridge; BridgeIP (with PodCIDR's prefix) is its
	// address, the pods' gateway and the kubelet's node IP.
	Bridge   = "cni0"
	BridgeIP = "10.244.0.1"
	// PodCIDR is host-local's range on Bridge.
	PodCIDR = "10.244.0.0/24"
	// ClusterCIDR is the range the guard keeps off the wire (PodCIDR is
	// inside it).
	ClusterCIDR = "10.244.0.0/16"
	// ServiceCIDR is the ClusterIP range.
	ServiceCIDR = "10.0.0.0/24"
	// GuardTable is the nft table (family inet) that keeps traffic on
	// the machine.
	GuardTable = "custody-guard"
)

var guardTmpl = template.Must(template.New("guard").Parse(`table inet {{.Table}} {
	chain forward {
		type filter hook forward priority -10; policy accept;
		oifname { {{.Ifaces}} } counter drop comment "custody: nothing forwarded leaves the machine"
	}
	chain output {
		type filter hook output priority -10; policy accept;
		oifname { {{.Ifaces}} } ip daddr { {{.ClusterCIDR}}, {{.ServiceCIDR}} } counter drop comment "custody: pod and service addresses never go on the wire"
	}
}
`))

// GuardRuleset is the nft ruleset of the guard table for the given
// outbound interfaces (the default-route ones). It drops every packet
// forwarded out of them and host output to ClusterCIDR or ServiceCIDR
// through them. Priority -10 runs it before the filter chains of
// kube-proxy and the policy agent (priority 0) and after NAT output
// (-100), so a ClusterIP DNATed to a pod is judged on its new route.
func GuardRuleset(ifaces []string) (string, error) {
	if len(ifaces) == 0 {
		return "", fmt.Errorf("node: guard: no outbound interface to guard")
	}
	quoted := make([]string, len(ifaces))
	for i, n := range ifaces {
		if n == "" || strings.ContainsAny(n, "\"{}; \t\n") {
			return "", fmt.Errorf("node: guard: bad interface name %q", n)
		}
		quoted[i] = `"` + n + `"`
	}
	var b bytes.Buffer
	err := guardTmpl.Execute(&b, map[string]string{
		"Table": GuardTable, "Ifaces": strings.Join(quoted, ", "),
		"ClusterCIDR": ClusterCIDR, "ServiceCIDR": ServiceCIDR,
	})
	return b.String(), err
}

// CNIConfig is the CNI network list containerd's CRI plugin reads: the
// bridge plugin on Bridge (gateway BridgeIP, no masquerade, hairpin for
// a pod reaching itself through a Service), host-local IPAM over PodCIDR,
// and portmap. Plugins come from /usr/lib/cni (Debian's
// containernetworking-plugins).
func CNIConfig() string {
	return `{
  "cniVersion": "0.4.0",
  "name": "custody",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + Bridge + `",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + PodCIDR + `", "gateway": "` + BridgeIP + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`
}

// defaultRouteIfaces returns the interfaces of the IPv4 and IPv6 default
// routes (from /proc/net/route and /proc/net/ipv6_route), sorted.
func defaultRouteIfaces() []string {
	set := map[string]bool{}
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 7 && f[1] == "00000000" && f[7] == "00000000" {
				set[f[0]] = true
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/ipv6_route"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
				set[f[9]] = true
			}
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// links returns the names of the network interfaces.
func links() []string {
	ents, _ := os.ReadDir("/sys/class/net")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// nftTables returns the nft tables as "family name" lines.
func nftTables(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables, nil
}

// ipsets returns the ipset names (none when ipset is not installed).
func ipsets(ctx context.Context) []string {
	out, err := run(ctx, "ipset", "list", "-n")
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// setUpNetwork installs the guard table, then creates Bridge with
// BridgeIP and writes the CNI config into confDir.
func setUpNetwork(ctx context.Context, ifaces []string, confDir string) error {
	rules, err := GuardRuleset(ifaces)
	if err != nil {
		return err
	}
	if _, err := runIn(ctx, rules, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("node: guard table: %w", err)
	}
	for _, args := range [][]string{
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", BridgeIP + "/24", "dev", Bridge},
		{"link", "set", Bridge, "up"},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			return fmt.Errorf("node: bridge: %w", err)
		}
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(confDir+"/10-custody.conflist", []byte(CNIConfig()), 0o644)
}
