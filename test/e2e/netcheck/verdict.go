package netcheck

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SandboxPolicy returns the NetworkPolicy that confines pods with labels
// in ns: the one a SandboxTemplate controls (agent-sandbox makes it from
// the template's networkPolicy), else the first that selects them, plus
// every policy that selects them. Error: none selects them.
func SandboxPolicy(ctx context.Context, kube kubernetes.Interface, ns string, labels map[string]string) (*networkingv1.NetworkPolicy, []networkingv1.NetworkPolicy, error) {
	nps, err := SelectingPolicies(ctx, kube, ns, labels)
	if err != nil {
		return nil, nil, err
	}
	if len(nps) == 0 {
		return nil, nil, fmt.Errorf("netcheck: no NetworkPolicy in %s selects labels %v", ns, labels)
	}
	np := &nps[0]
	for i := range nps {
		if ref := metav1.GetControllerOf(&nps[i]); ref != nil && ref.Kind == "SandboxTemplate" {
			np = &nps[i]
		}
	}
	return np, nps, nil
}

// CanaryOK: the control pod connected to every target.
func (r *Report) CanaryOK() bool { return allConnected(r.Canary, true) }

// SandboxOK: the sandbox-labelled pod connected to exactly the targets
// named in allowed.
func (r *Report) SandboxOK(allowed []Target) bool {
	ok := map[string]bool{}
	for _, t := range allowed {
		ok[t.Name] = true
	}
	for _, o := range r.Sandbox {
		if o.Connected != ok[o.Name] {
			return false
		}
	}
	return len(r.Sandbox) > 0
}

// RelaxedOK: with egress relaxed, every MustFail target connected.
func (r *Report) RelaxedOK() bool { return allConnected(r.Relaxed, true) }

func allConnected(os []Outcome, want bool) bool {
	for _, o := range os {
		if o.Connected != want {
			return false
		}
	}
	return len(os) > 0
}
