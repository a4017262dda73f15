package netcheck

import (
	"context"
	"fmt"
	"strings"

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
// named in allowed, and every other target was [Outcome.Blocked] (a name
// that did not resolve is no verdict on the path).
func (r *Report) SandboxOK(allowed []Target) bool {
	ok := map[string]bool{}
	for _, t := range allowed {
		ok[t.Name] = true
	}
	for _, o := range r.Sandbox {
		if ok[o.Name] && !o.Connected || !ok[o.Name] && !o.Blocked() {
			return false
		}
	}
	return len(r.Sandbox) > 0
}

// Blocked: the dial reached an address and got no connection: a timeout
// (a policy drop), a refusal or another socket error. Not connected
// because the name did not resolve (or the line is unknown) is not
// Blocked: a DNS failure says nothing about the policy.
func (o Outcome) Blocked() bool {
	for _, p := range []string{"timeout", "refused", "error after"} {
		if strings.HasPrefix(o.Observed, p) {
			return !o.Connected
		}
	}
	return false
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
