package realnode

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
)

// Fixed names and addresses of the real node.
const (
	// NodeName is the kubelet's --hostname-override and the Node object's
	// name; the policy agent and kube-proxy use it too. "vm" resolves to
	// 127.0.0.1 on this machine kind.
	NodeName = "vm"
	// DNSServiceIP is Service kube-system/kube-dns, the pods' nameserver.
	DNSServiceIP = "10.0.0.10"
	// ClusterDomain is the DNS domain of Services.
	ClusterDomain = "cluster.local"
	// PodAPIPort is the port on the bridge address where pods reach the API
	// server (ServePodAPI).
	PodAPIPort = "6443"
)

// KubeletConfig renders the KubeletConfiguration: cgroup v1 allowed with
// the cgroupfs driver (this VM has no usable cgroup v2), the containerd
// socket, serving on loopback only with anonymous auth and AlwaysAllow
// (the API server presents no client certificate), clusterDNS
// [DNSServiceIP], no upstream resolv.conf, no image GC, oomScoreAdj 0
// (root lacks CAP_SYS_RESOURCE) and protectKernelDefaults false (with
// true it refuses to start; the sysctls it writes are restored by
// node.Teardown). socket is a path without the unix:// scheme.
func KubeletConfig(socket string) (string, error) {
	return render(kubeletTmpl, map[string]string{"Socket": socket, "DNS": DNSServiceIP, "Domain": ClusterDomain})
}

// KubeProxyConfig renders the KubeProxyConfiguration: nftables mode, the
// pod CIDR as clusterCIDR, conntrack settings all zero (leave the host's
// sysctls alone), oomScoreAdj 0, metrics and healthz on loopback.
func KubeProxyConfig(kubeconfig, clusterCIDR string) (string, error) {
	return render(kubeProxyTmpl, map[string]string{"Kubeconfig": kubeconfig, "CIDR": clusterCIDR, "Node": NodeName})
}

func render(t *template.Template, v map[string]string) (string, error) {
	for k, s := range v {
		if s == "" || strings.ContainsAny(s, "\"\\\n") {
			return "", fmt.Errorf("realnode: config value %s=%q is empty or needs quoting", k, s)
		}
	}
	var b bytes.Buffer
	if err := t.Execute(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

var kubeletTmpl = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: "unix://{{.Socket}}"
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDNS: ["{{.DNS}}"]
clusterDomain: "{{.Domain}}"
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
oomScoreAdj: 0
protectKernelDefaults: false
serializeImagePulls: false
`))

var kubeProxyTmpl = template.Must(template.New("kube-proxy").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clusterCIDR: "{{.CIDR}}"
hostnameOverride: "{{.Node}}"
clientConnection:
  kubeconfig: "{{.Kubeconfig}}"
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`))
