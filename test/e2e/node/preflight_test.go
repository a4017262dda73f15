package node

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// fakeSystem is a Debian machine as root with every package and kernel
// feature; tests take things away.
type fakeSystem struct {
	goos      string
	euid      int
	installed map[string]bool
	noApt     bool
	noDpkg    bool
	files     map[string][]byte
}

func newFake() *fakeSystem {
	f := &fakeSystem{goos: "linux", installed: map[string]bool{}, files: map[string][]byte{
		"/proc/sys/net/bridge/bridge-nf-call-iptables": []byte("1\n"),
		"/proc/filesystems":                            []byte("nodev\tsysfs\n\text4\nnodev\toverlay\n"),
		"/proc/self/status":                            []byte("Name:\tx\nCapEff:\t000001fffeffffff\n"),
		"/sys/module/nf_tables/refcnt":                 []byte("0\n"),
	}}
	for _, p := range Packages {
		f.installed[p] = true
	}
	return f
}

func (f *fakeSystem) sys() System {
	return System{
		GOOS:    f.goos,
		Geteuid: func() int { return f.euid },
		LookPath: func(name string) (string, error) {
			if (name == "apt-get" && f.noApt) || (name == "dpkg-query" && f.noDpkg) {
				return "", errors.New("not found")
			}
			return "/usr/bin/" + name, nil
		},
		ReadFile: func(p string) ([]byte, error) {
			if b, ok := f.files[p]; ok {
				return b, nil
			}
			return nil, os.ErrNotExist
		},
		Output: func(_ context.Context, name string, args ...string) ([]byte, error) {
			pkg := args[len(args)-1]
			if name == "dpkg-query" && f.installed[pkg] {
				return []byte("install ok installed"), nil
			}
			return []byte("unknown ok not-installed"), errors.New("exit status 1")
		},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name        string
		change      func(*fakeSystem)
		blockers    []string // substrings, one per blocker, in order
		missing     []string
		installable bool
	}{
		{name: "ready", change: func(*fakeSystem) {}, installable: true},
		{name: "not linux", change: func(f *fakeSystem) { f.goos = "darwin" }, blockers: []string{"not Linux (darwin)"}},
		{name: "not root", change: func(f *fakeSystem) { f.euid = 1000 }, blockers: []string{"not root (euid 1000)"}},
		{
			name:        "missing packages, installable",
			change:      func(f *fakeSystem) { f.installed["containerd"], f.installed["socat"] = false, false },
			blockers:    []string{"missing Debian packages: containerd socat; apt-get can install them"},
			missing:     []string{"containerd", "socat"},
			installable: true,
		},
		{
			name:     "missing packages, not root",
			change:   func(f *fakeSystem) { f.euid = 1000; f.installed["runc"] = false },
			blockers: []string{"not root", "missing Debian packages: runc; apt-get cannot install them here"},
			missing:  []string{"runc"},
		},
		{
			name:     "missing packages, no apt-get",
			change:   func(f *fakeSystem) { f.noApt = true; f.installed["ipset"] = false },
			blockers: []string{"missing Debian packages: ipset; apt-get cannot install them here"},
			missing:  []string{"ipset"},
		},
		{name: "not Debian", change: func(f *fakeSystem) { f.noDpkg = true }, blockers: []string{"not Debian (no dpkg-query)"}},
		{
			name: "kernel without overlay and br_netfilter",
			change: func(f *fakeSystem) {
				f.files["/proc/filesystems"] = []byte("\text4\n")
				delete(f.files, "/proc/sys/net/bridge/bridge-nf-call-iptables")
			},
			blockers:    []string{"kernel lacks br_netfilter", "kernel lacks overlay filesystem"},
			installable: true,
		},
		{
			name: "kernel config: nf_tables and nft_compat off",
			change: func(f *fakeSystem) {
				delete(f.files, "/sys/module/nf_tables/refcnt")
				f.files["/proc/config.gz"] = gz(t, "CONFIG_VETH=y\n# CONFIG_NF_TABLES is not set\nCONFIG_NFT_COMPAT=n\nCONFIG_OVERLAY_FS=m\n")
			},
			blockers:    []string{"kernel lacks nf_tables", "kernel lacks nft_compat"},
			installable: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			tt.change(f)
			p := Check(context.Background(), f.sys())
			if len(p.Blockers) != len(tt.blockers) {
				t.Fatalf("Check().Blockers = %q, want %d matching %q", p.Blockers, len(tt.blockers), tt.blockers)
			}
			for i, want := range tt.blockers {
				if !strings.Contains(p.Blockers[i], want) {
					t.Errorf("Check().Blockers[%d] = %q, want it to contain %q", i, p.Blockers[i], want)
				}
			}
			if p.OK() != (len(tt.blockers) == 0) {
				t.Errorf("Check().OK() = %v with blockers %q", p.OK(), p.Blockers)
			}
			if !slices.Equal(p.Missing, tt.missing) {
				t.Errorf("Check().Missing = %q, want %q", p.Missing, tt.missing)
			}
			if p.Installable != tt.installable {
				t.Errorf("Check().Installable = %v, want %v", p.Installable, tt.installable)
			}
		})
	}
}

func TestCheckNotesMissingCapSysResource(t *testing.T) {
	f := newFake()
	f.files["/proc/self/status"] = []byte("CapEff:\t000001fffeffffff\n") // bit 24 clear
	if p := Check(context.Background(), f.sys()); len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "CAP_SYS_RESOURCE") {
		t.Errorf("Check().Notes = %q, want the CAP_SYS_RESOURCE note", p.Notes)
	}
	f.files["/proc/self/status"] = []byte("CapEff:\t000001ffffffffff\n")
	if p := Check(context.Background(), f.sys()); len(p.Notes) != 0 {
		t.Errorf("Check().Notes = %q with CAP_SYS_RESOURCE, want none", p.Notes)
	}
}

func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
