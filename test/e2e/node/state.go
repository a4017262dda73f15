package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultStateDir holds the state file, pid files and the work dir. It is
// on disk (not /run) so that the paths the node wrote survive a crash and
// a reboot can still be cleaned; the boot ID in the state tells Teardown
// whether the kernel state it recorded is still current.
const DefaultStateDir = "/var/lib/custody-node"

// TrackedSysctls are the sysctls something in the node rewrites: the
// kubelet (kernel.panic=10, kernel.panic_on_oops=1,
// vm.overcommit_memory=1, vm.panic_on_oom=0, kernel.keys.*) and the CNI
// bridge plugin (ip forwarding). Up records them; Teardown restores them.
var TrackedSysctls = []string{
	"kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding",
	"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
}

// FixedPaths are the paths the kubelet, containerd's CRI plugin and `ctr`
// write whatever their config says. Teardown removes those that did not
// exist at the baseline.
// /run/netns is created (and bind-mounted onto itself) by the first
// `ip netns add` or CNI netns.
var FixedPaths = []string{"/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/run/containerd", "/opt/containerd", netnsDir}

// Cgroup names the node creates under each v1 controller (and v2): the
// kubelet's kubepods tree and containerd's namespace k8s.io.
var Cgroups = []string{"kubepods", "kubepods.slice", "k8s.io"}

// state is the baseline recorded before the node changes anything.
type state struct {
	// BootID is /proc/sys/kernel/random/boot_id when recorded.
	BootID string `json:"boot_id"`
	// WorkDir is where containerd's root, state, socket and the CNI
	// config live.
	WorkDir string `json:"work_dir"`
	// Sysctls maps each of TrackedSysctls that exists to its value.
	Sysctls map[string]string `json:"sysctls"`
	// Tables are the nft tables present ("family name").
	Tables []string `json:"tables"`
	// IPSets are the ipset names present.
	IPSets []string `json:"ipsets"`
	// Links are the network interface names present.
	Links []string `json:"links"`
	// Netns are the names in /run/netns.
	Netns []string `json:"netns"`
	// Paths are the entries of FixedPaths that existed.
	Paths []string `json:"paths"`
	// Cgroups are the cgroup directories named in Cgroups that existed.
	Cgroups []string `json:"cgroups"`
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

// loadState returns the recorded state, or nil when there is none.
func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: read state: %w", err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("node: parse %s: %w", statePath(dir), err)
	}
	return &s, nil
}

// save writes the state durably (temp file, fsync, rename).
func (s *state) save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("node: write state: %w", err)
	}
	return os.Rename(tmp, statePath(dir))
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func readSysctls() map[string]string {
	m := map[string]string{}
	for _, name := range TrackedSysctls {
		if b, err := os.ReadFile(sysctlPath(name)); err == nil {
			m[name] = strings.TrimSpace(string(b))
		}
	}
	return m
}
