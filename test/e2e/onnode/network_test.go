package onnode

import (
	"testing"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/netcheck"
)

// TestSandboxNetworkPolicyEnforced is seeds 000 check 5 and 002 check 2
// as checks that can fail: a canary reaches every target, a pod the
// sandbox's NetworkPolicy selects reaches only custody's API and gateway
// by DNS, and with egress relaxed by an extra policy the blocked targets
// connect (the policy, not the path, blocked them).
func TestSandboxNetworkPolicyEnforced(t *testing.T) {
	ctx := need(t)
	if err := env.CreateClaim(ctx, "netpol"); err != nil {
		t.Fatal(err)
	}
	pod, err := env.ClaimPod(ctx, "netpol")
	if err != nil {
		t.Fatal(err)
	}
	np, _, err := netcheck.SandboxPolicy(ctx, cluster.CP.Kube, fixture.Namespace, pod.Labels)
	if err != nil {
		t.Fatal(err)
	}
	allowed, mustFail := dep.Targets()
	r, err := netcheck.Run(ctx, cluster.CP.Kube, netcheck.Plan{Namespace: fixture.Namespace, Selector: np.Spec.PodSelector.MatchLabels, PodLabels: pod.Labels,
		ServiceAccount: fixture.SandboxSA, Allowed: allowed, MustFail: mustFail})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("policy %s\ncanary:  %s\nsandbox: %s\nrelaxed: %s", np.Name, netcheck.Describe(r.Canary), netcheck.Describe(r.Sandbox), netcheck.Describe(r.Relaxed))
	if !r.CanaryOK() {
		t.Errorf("the canary did not reach every target: %s", netcheck.Describe(r.Canary))
	}
	if !r.SandboxOK(allowed) {
		t.Errorf("the sandbox probe: %s; want only the custody API and gateway connected", netcheck.Describe(r.Sandbox))
	}
	if !r.RelaxedOK() {
		t.Errorf("with egress relaxed: %s; want every blocked target connected", netcheck.Describe(r.Relaxed))
	}
}
