package node

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Packages are the Debian packages a real node needs: the runtime
// (containerd, runc, the CNI plugins in /usr/lib/cni) and the tools the
// kubelet, kube-proxy, the CNI plugins and the teardown call.
var Packages = []string{"containerd", "runc", "containernetworking-plugins", "iptables", "nftables", "ipset", "conntrack", "socat"}

// System is what [Check] reads from the machine. The zero value reads
// the real machine; tests replace single functions.
type System struct {
	// GOOS defaults to runtime.GOOS.
	GOOS string
	// Geteuid defaults to os.Geteuid.
	Geteuid func() int
	// LookPath defaults to exec.LookPath.
	LookPath func(string) (string, error)
	// ReadFile defaults to os.ReadFile (for /proc and /sys).
	ReadFile func(string) ([]byte, error)
	// Output runs a command and returns its standard output; default
	// exec.CommandContext(...).Output.
	Output func(ctx context.Context, name string, args ...string) ([]byte, error)
}

func (s System) withDefaults() System {
	if s.GOOS == "" {
		s.GOOS = runtime.GOOS
	}
	if s.Geteuid == nil {
		s.Geteuid = os.Geteuid
	}
	if s.LookPath == nil {
		s.LookPath = exec.LookPath
	}
	if s.ReadFile == nil {
		s.ReadFile = os.ReadFile
	}
	if s.Output == nil {
		s.Output = func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).Output()
		}
	}
	return s
}

// Preflight is the result of [Check].
type Preflight struct {
	// Blockers are the reasons a real node cannot run now, one line each;
	// empty means it can.
	Blockers []string
	// Missing are the entries of [Packages] that are not installed.
	Missing []string
	// Installable reports whether [Install] can install Missing (Debian
	// with apt-get, running as root). Blockers other than Missing may
	// remain after an install.
	Installable bool
	// Notes are facts that do not block (for example that root lacks
	// CAP_SYS_RESOURCE, which the containerd config works around).
	Notes []string
}

// OK reports whether nothing blocks a real node.
func (p Preflight) OK() bool { return len(p.Blockers) == 0 }

// Reason joins the blockers into one line for a SKIP message.
func (p Preflight) Reason() string { return strings.Join(p.Blockers, "; ") }

// Check inspects the machine without changing it.
func Check(ctx context.Context, sys System) Preflight {
	sys = sys.withDefaults()
	var p Preflight
	if sys.GOOS != "linux" {
		p.Blockers = append(p.Blockers, "not Linux ("+sys.GOOS+"): a real node needs Linux namespaces, cgroups and netfilter")
		return p
	}
	root := sys.Geteuid() == 0
	if !root {
		p.Blockers = append(p.Blockers, fmt.Sprintf("not root (euid %d): containerd, the bridge and nftables need root", sys.Geteuid()))
	}
	_, dpkgErr := sys.LookPath("dpkg-query")
	_, aptErr := sys.LookPath("apt-get")
	if dpkgErr != nil {
		p.Blockers = append(p.Blockers, "not Debian (no dpkg-query): install by hand: "+strings.Join(Packages, " "))
	} else {
		for _, pkg := range Packages {
			out, err := sys.Output(ctx, "dpkg-query", "-W", "-f=${Status}", pkg)
			if err != nil || !bytes.Contains(out, []byte("install ok installed")) {
				p.Missing = append(p.Missing, pkg)
			}
		}
		p.Installable = aptErr == nil && root
		if len(p.Missing) > 0 {
			how := "apt-get can install them (node-check -install)"
			if !p.Installable {
				how = "apt-get cannot install them here (needs apt-get and root)"
			}
			p.Blockers = append(p.Blockers, "missing Debian packages: "+strings.Join(p.Missing, " ")+"; "+how)
		}
	}
	p.Blockers = append(p.Blockers, kernelBlockers(sys)...)
	if caps, err := sys.ReadFile("/proc/self/status"); err == nil && root && !hasCap(caps, 24) {
		p.Notes = append(p.Notes, "root lacks CAP_SYS_RESOURCE: containerd runs with restrict_oom_score_adj = true, the kubelet and kube-proxy need oomScoreAdj: 0")
	}
	return p
}

// kernelBlockers checks nf_tables, br_netfilter and overlayfs from
// /proc/config.gz when the kernel has it, else from /proc and /sys.
func kernelBlockers(sys System) []string {
	config := map[string]string{}
	if gz, err := sys.ReadFile("/proc/config.gz"); err == nil {
		if r, err := gzip.NewReader(bytes.NewReader(gz)); err == nil {
			b, _ := io.ReadAll(r)
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "CONFIG_") {
					config[k] = v
				}
			}
		}
	}
	exists := func(path string) bool { _, err := sys.ReadFile(path); return err == nil }
	fs, _ := sys.ReadFile("/proc/filesystems")
	checks := []struct {
		name, config string
		present      bool
	}{
		{"nf_tables (nftables)", "CONFIG_NF_TABLES", exists("/sys/module/nf_tables/refcnt") || exists("/proc/net/nf_tables")},
		{"br_netfilter", "CONFIG_BRIDGE_NETFILTER", exists("/proc/sys/net/bridge/bridge-nf-call-iptables")},
		{"overlay filesystem", "CONFIG_OVERLAY_FS", bytes.Contains(fs, []byte("\toverlay\n"))},
		{"veth", "CONFIG_VETH", false},
		{"nft_compat (xtables targets in nft, for NFQUEUE)", "CONFIG_NFT_COMPAT", false},
	}
	var out []string
	for _, c := range checks {
		v, known := config[c.config]
		switch {
		case c.present, v == "y", v == "m":
			continue
		case !known && len(config) == 0 && c.name == "veth", !known && len(config) == 0 && strings.HasPrefix(c.name, "nft_compat"):
			continue // cannot tell without /proc/config.gz; the bring-up will say
		}
		out = append(out, "kernel lacks "+c.name+" ("+c.config+")")
	}
	return out
}

// hasCap reports whether bit is set in CapEff of a /proc/<pid>/status.
func hasCap(status []byte, bit uint) bool {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var n uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%x", &n); err != nil {
				return false
			}
			return n&(1<<bit) != 0
		}
	}
	return false
}

// Install runs `apt-get update` then `apt-get install -y` for pkgs, with
// apt's output (its progress) on progress. It needs root and apt-get.
func Install(ctx context.Context, progress io.Writer, pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	if progress == nil {
		progress = io.Discard
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"update"},
		append([]string{"install", "-y", "--no-install-recommends", "-o", "Dpkg::Progress-Fancy=0"}, pkgs...),
	} {
		fmt.Fprintf(progress, "node: apt-get %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Stdout, cmd.Stderr, cmd.Env = progress, progress, env
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("node: apt-get %s: %w", args[0], err)
		}
	}
	return nil
}
