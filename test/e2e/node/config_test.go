package node

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestGuardRuleset(t *testing.T) {
	got, err := GuardRuleset([]string{"eth0", "wlan0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"table inet " + GuardTable + " {",
		"type filter hook forward priority -10; policy accept;",
		`oifname { "eth0", "wlan0" } counter drop`,
		"type filter hook output priority -10; policy accept;",
		`oifname { "eth0", "wlan0" } ip daddr { 10.244.0.0/16, 10.0.0.0/24 } counter drop`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("GuardRuleset() lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range [][]string{nil, {""}, {`eth0" accept`}, {"a;b"}, {"a b"}} {
		if _, err := GuardRuleset(bad); err == nil {
			t.Errorf("GuardRuleset(%q) = nil error, want a refusal", bad)
		}
	}
}

func TestCNIConfig(t *testing.T) {
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type       string `json:"type"`
			Bridge     string `json:"bridge"`
			IsGateway  bool   `json:"isGateway"`
			IPMasq     bool   `json:"ipMasq"`
			HairpinMod bool   `json:"hairpinMode"`
			IPAM       struct {
				Type   string `json:"type"`
				Ranges [][]struct {
					Subnet  string `json:"subnet"`
					Gateway string `json:"gateway"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(CNIConfig()), &conf); err != nil {
		t.Fatalf("CNIConfig() is not JSON: %v", err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" {
		t.Fatalf("CNIConfig() plugins = %+v, want bridge then portmap", conf.Plugins)
	}
	b := conf.Plugins[0]
	if b.Bridge != Bridge || !b.IsGateway || b.IPMasq || !b.HairpinMod || b.IPAM.Type != "host-local" {
		t.Errorf("CNIConfig() bridge = %+v, want cni0, gateway, no masquerade, hairpin, host-local", b)
	}
	if r := b.IPAM.Ranges; len(r) != 1 || len(r[0]) != 1 || r[0][0].Subnet != PodCIDR || r[0][0].Gateway != BridgeIP {
		t.Errorf("CNIConfig() ranges = %+v, want %s via %s", r, PodCIDR, BridgeIP)
	}
}

func TestContainerdConfig(t *testing.T) {
	p := containerdPaths("/w")
	got, err := ContainerdConfig(p, "custody.local/pause:v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`root = "/w/containerd/root"`,
		`state = "/w/containerd/state"`,
		`address = "/w/containerd/containerd.sock"`,
		`path = "/w/containerd/opt"`,
		`sandbox_image = "custody.local/pause:v1"`,
		`restrict_oom_score_adj = true`,
		`SystemdCgroup = false`,
		`bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/w/cni/net.d"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ContainerdConfig() lacks %q:\n%s", want, got)
		}
	}
	if _, err := ContainerdConfig(p, `x"y`); err == nil {
		t.Error(`ContainerdConfig(pause x"y) = nil error, want a refusal (it would break out of the TOML string)`)
	}
}

func TestPackets(t *testing.T) {
	listing := `table inet custody-guard {
	chain forward {
		oifname "eth0" counter packets 2 bytes 120 drop comment "x"
	}
	chain output {
		oifname "eth0" ip daddr { 10.0.0.0/24 } counter packets 14 bytes 840 drop
	}
}`
	if got := packets(listing); len(got) != 2 || got[0] != 2 || got[1] != 14 {
		t.Errorf("packets() = %v, want [2 14]", got)
	}
}
