package realnode

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestKubeletConfig(t *testing.T) {
	out, err := KubeletConfig("/var/lib/custody-node/work/containerd/containerd.sock")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Kind                     string   `json:"kind"`
		FailCgroupV1             *bool    `json:"failCgroupV1"`
		CgroupDriver             string   `json:"cgroupDriver"`
		ContainerRuntimeEndpoint string   `json:"containerRuntimeEndpoint"`
		Address                  string   `json:"address"`
		HealthzBindAddress       string   `json:"healthzBindAddress"`
		ClusterDNS               []string `json:"clusterDNS"`
		ClusterDomain            string   `json:"clusterDomain"`
		ResolvConf               *string  `json:"resolvConf"`
		OOMScoreAdj              *int     `json:"oomScoreAdj"`
		ProtectKernelDefaults    *bool    `json:"protectKernelDefaults"`
		ImageGCHigh              int      `json:"imageGCHighThresholdPercent"`
		Authentication           struct {
			Anonymous struct{ Enabled bool } `json:"anonymous"`
		} `json:"authentication"`
		Authorization struct{ Mode string } `json:"authorization"`
	}
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.Kind != "KubeletConfiguration",
		cfg.FailCgroupV1 == nil || *cfg.FailCgroupV1,
		cfg.CgroupDriver != "cgroupfs",
		cfg.ContainerRuntimeEndpoint != "unix:///var/lib/custody-node/work/containerd/containerd.sock",
		cfg.Address != "127.0.0.1", cfg.HealthzBindAddress != "127.0.0.1",
		len(cfg.ClusterDNS) != 1 || cfg.ClusterDNS[0] != DNSServiceIP,
		cfg.ClusterDomain != ClusterDomain,
		cfg.ResolvConf == nil || *cfg.ResolvConf != "",
		cfg.OOMScoreAdj == nil || *cfg.OOMScoreAdj != 0,
		cfg.ProtectKernelDefaults == nil || *cfg.ProtectKernelDefaults,
		cfg.ImageGCHigh != 100,
		!cfg.Authentication.Anonymous.Enabled, cfg.Authorization.Mode != "AlwaysAllow":
		t.Errorf("kubelet config %+v from:\n%s", cfg, out)
	}
}

func TestKubeProxyConfig(t *testing.T) {
	out, err := KubeProxyConfig("/tmp/cp/admin.kubeconfig", "10.244.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Mode             string `json:"mode"`
		ClusterCIDR      string `json:"clusterCIDR"`
		HostnameOverride string `json:"hostnameOverride"`
		ClientConnection struct {
			Kubeconfig string `json:"kubeconfig"`
		} `json:"clientConnection"`
		MetricsBindAddress string         `json:"metricsBindAddress"`
		HealthzBindAddress string         `json:"healthzBindAddress"`
		OOMScoreAdj        *int           `json:"oomScoreAdj"`
		Conntrack          map[string]any `json:"conntrack"`
	}
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != "nftables" || cfg.ClusterCIDR != "10.244.0.0/24" || cfg.HostnameOverride != NodeName ||
		cfg.ClientConnection.Kubeconfig != "/tmp/cp/admin.kubeconfig" ||
		!strings.HasPrefix(cfg.MetricsBindAddress, "127.0.0.1:") || !strings.HasPrefix(cfg.HealthzBindAddress, "127.0.0.1:") ||
		cfg.OOMScoreAdj == nil || *cfg.OOMScoreAdj != 0 {
		t.Errorf("kube-proxy config %+v from:\n%s", cfg, out)
	}
	for _, k := range []string{"maxPerCore", "min", "tcpEstablishedTimeout", "tcpCloseWaitTimeout", "udpTimeout", "udpStreamTimeout"} {
		if v, ok := cfg.Conntrack[k]; !ok || (v != float64(0) && v != "0s") {
			t.Errorf("conntrack.%s = %v, want zero (leave the host's conntrack sysctls alone)", k, v)
		}
	}
}

func TestConfigRefusesValuesNeedingQuotes(t *testing.T) {
	for _, bad := range []string{"", "/a\"b", "/a\nb", `/a\b`} {
		if _, err := KubeletConfig(bad); err == nil {
			t.Errorf("KubeletConfig(%q) rendered", bad)
		}
		if _, err := KubeProxyConfig(bad, "10.244.0.0/24"); err == nil {
			t.Errorf("KubeProxyConfig(%q) rendered", bad)
		}
	}
}
