package netcheck

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A MustFail target whose name did not resolve in the sandbox pod is no
// proof that the policy blocks it: SandboxOK must not pass on it (a DNS
// hiccup would otherwise hide a reachable API server or store).
func TestSandboxOKRefusesUnresolved(t *testing.T) {
	allowed := []Target{{"custody", "custody.custody-system.svc:8865"}}
	r := &Report{Sandbox: []Outcome{
		{Target: allowed[0], Connected: true, Observed: "connected to 10.0.0.12:8865 in 3ms"},
		{Target: Target{"api", "kubernetes.default.svc.cluster.local:443"}, Observed: "unresolved after 2s: lookup kubernetes.default.svc.cluster.local: i/o timeout"},
	}}
	if r.SandboxOK(allowed) {
		t.Error("an unresolved MustFail target counted as blocked")
	}
	// the netprobe line before this branch
	r.Sandbox[1].Observed = "error lookup kubernetes.default.svc.cluster.local: no such host"
	if r.SandboxOK(allowed) {
		t.Error("a DNS error counted as blocked")
	}
	for _, obs := range []string{"timeout after 5s", "refused after 1ms", "error after 1ms: dial tcp 10.0.0.1:443: connect: no route to host"} {
		r.Sandbox[1].Observed = obs
		if !r.SandboxOK(allowed) {
			t.Errorf("%q not counted as blocked", obs)
		}
	}
}

func policy(name string, sel map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agents"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}}}
}

// Run refuses probes that would not stand for the sandbox pod: a second
// policy selecting the sandbox through a label the probe pods lack (here
// an allow-all egress one) would otherwise leave the probe confined and
// the sandbox not, and check 5 would pass falsely.
func TestRunRefusesUnrepresentativeProbes(t *testing.T) {
	sandbox := policy("sandbox", map[string]string{"sandbox": "t1"})
	leak := policy("allow-all", map[string]string{"app": "agent"})
	podLabels := map[string]string{"sandbox": "t1", "app": "agent"}
	plan := Plan{Namespace: "agents", Selector: sandbox.Spec.PodSelector.MatchLabels, PodLabels: podLabels}

	kube := fake.NewClientset(sandbox, leak)
	_, err := Run(context.Background(), kube, plan)
	if err == nil || !strings.Contains(err.Error(), "allow-all") {
		t.Fatalf("Run with a policy the probes miss: err = %v", err)
	}
	// A namespace-wide policy selects the canary too: no control then.
	kube = fake.NewClientset(sandbox, policy("default-deny", nil))
	if _, err := Run(context.Background(), kube, plan); err == nil || !strings.Contains(err.Error(), "canary") {
		t.Fatalf("Run with a selected canary: err = %v", err)
	}
	// An empty selector would make the relax policy select every pod.
	plan.Selector = nil
	if _, err := Run(context.Background(), fake.NewClientset(sandbox), plan); err == nil {
		t.Fatal("Run with an empty Selector was not refused")
	}
	// Same policies for probe and pod: the check lets it through (the
	// fake never runs the pod, so Run fails later, waiting for it).
	if err := checkLabels(context.Background(), fake.NewClientset(sandbox), Plan{Namespace: "agents", Selector: sandbox.Spec.PodSelector.MatchLabels, PodLabels: map[string]string{"sandbox": "t1", "x": "y"}}); err != nil {
		t.Fatal(err)
	}
}
