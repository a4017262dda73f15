package e2e

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sandboxext "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/agentcustody/custody/internal/cli"
)

// TestDeployMediated builds deploy/mediated (deploy/ with the mediated
// component) and checks it: the sandbox's egress reaches only cluster DNS
// (53) and custody's pods on 8865, 8866 and 8869, with no ipBlock (no
// public internet); custody serves the egress proxy on 8869 with args
// `custody serve` accepts, and its Service has the port; everything else
// is deploy/ unchanged.
func TestDeployMediated(t *testing.T) {
	base := kustomizeBuild(t, ".")
	med := kustomizeBuild(t, "mediated")
	for k := range base {
		if _, ok := med[k]; !ok {
			t.Errorf("deploy/mediated lost %s", k)
		}
	}
	var tmpl sandboxext.SandboxTemplate
	if err := json.Unmarshal(med["SandboxTemplate/agent"], &tmpl); err != nil {
		t.Fatal(err)
	}
	np := tmpl.Spec.NetworkPolicy
	if np == nil || len(np.Egress) != 2 {
		t.Fatalf("network policy %+v: want two egress rules (DNS, custody)", np)
	}
	var ports []int32
	for _, r := range np.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil {
				t.Errorf("egress rule reaches an ipBlock %v: the mediated sandbox reaches nothing but DNS and custody", to.IPBlock)
			}
			if to.PodSelector == nil || to.NamespaceSelector == nil {
				t.Errorf("egress peer %+v: want a pod in a named namespace", to)
			}
		}
		for _, p := range r.Ports {
			ports = append(ports, p.Port.IntVal)
		}
	}
	slices.Sort(ports)
	if want := []int32{53, 53, 8865, 8866, 8869}; !slices.Equal(ports, want) {
		t.Errorf("egress ports %v, want %v", ports, want)
	}
	c := tmpl.Spec.PodTemplate.Spec.Containers[0]
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "CUSTODY_EGRESS_PROXY" && e.Value == "http://custody.custody-system.svc:8869" }) {
		t.Errorf("agent env %+v: want CUSTODY_EGRESS_PROXY", c.Env)
	}

	var d appsv1.Deployment
	if err := json.Unmarshal(med["Deployment/custody"], &d); err != nil {
		t.Fatal(err)
	}
	cc := d.Spec.Template.Spec.Containers[0]
	cfg := cli.Defaults()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(cc.Args[1:]); err != nil {
		t.Fatalf("custody serve refuses the args %v: %v", cc.Args, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the configuration is invalid: %v", err)
	}
	if cfg.EgressListen != ":8869" || !slices.ContainsFunc(cc.Ports, func(p corev1.ContainerPort) bool { return p.Name == "egress" && p.ContainerPort == 8869 }) {
		t.Errorf("egress listener %q, ports %+v: want :8869 named egress", cfg.EgressListen, cc.Ports)
	}
	var svc corev1.Service
	if err := json.Unmarshal(med["Service/custody"], &svc); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "egress" && p.Port == 8869 }) {
		t.Errorf("Service ports %+v: want egress 8869", svc.Spec.Ports)
	}
}
