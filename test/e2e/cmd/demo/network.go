package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/incluster"
	"github.com/agentcustody/custody/test/e2e/netcheck"
)

// agentLog polls the agent container's log (through the API server and
// the kubelet) until it contains want or 30 s pass, and returns it.
func (s *scenario) agentLog(ctx context.Context, pod *corev1.Pod, want string) string {
	var logs string
	_ = fixture.Poll(ctx, 30*time.Second, func() (bool, error) {
		b, err := s.env.CP.Kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "agent"}).DoRaw(ctx)
		if err != nil {
			logs = "log: " + err.Error()
			return false, nil
		}
		logs = string(b)
		return strings.Contains(logs, want), nil
	})
	return logs
}

// agentProcess is check 1c: the sandbox's own process (the template's
// container, probe -exchange-every=1s with the projected token file) was
// refused while the pod sat in the warm pool (the demo waited for that
// before claiming it) and got a key for the claim once claimed.
func (s *scenario) agentProcess(ctx context.Context, pod *corev1.Pod) {
	logs := s.agentLog(ctx, pod, "exchange 200 agents/run-1")
	refused := strings.Index(logs, "exchange 401 warm_pool")
	granted := strings.Index(logs, "exchange 200 agents/run-1")
	ok := refused >= 0 && granted > refused
	observed := compactLog(logs)
	if !ok {
		observed += fmt.Sprintf(" [raw log %q]", logs)
	}
	s.line("1c", "the agent process in pod "+pod.Name+" exchanged its projected token itself", ok, observed,
		"want 401 warm_pool in the pool, then 200 for agents/run-1")
}

// compactLog keeps the outcome of each logged line, without timestamps.
func compactLog(logs string) string {
	var outs []string
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if _, rest, ok := strings.Cut(l, " exchange "); ok {
			outs = append(outs, rest)
		}
	}
	if len(outs) == 0 {
		return fmt.Sprintf("no exchange lines in %q", logs)
	}
	return "agent log: " + strings.Join(outs, " -> ")
}

// line prints one check with what was observed.
func (s *scenario) line(id, what string, ok bool, observed, why string) {
	if ok {
		s.passed++
		fmt.Printf("PASS %-3s %s: %s\n", id, what, observed)
		return
	}
	s.failed++
	fmt.Printf("FAIL %-3s %s: %s (%s)\n", id, what, observed, why)
}

// storeCheck is check 5 on the real node (see package netcheck): a
// canary, the paired probes from a pod the sandbox's NetworkPolicy
// selects, and causality. The report is kept for G2.
func (s *scenario) storeCheck(ctx context.Context, sandbox *corev1.Pod) {
	kube, d := s.env.CP.Kube, s.deploy
	np, nps, err := netcheck.SandboxPolicy(ctx, kube, fixture.Namespace, sandbox.Labels)
	if err != nil {
		s.line("5", "the sandbox's NetworkPolicy", false, err.Error(), "want the policy agent-sandbox made from the template")
		return
	}
	fmt.Printf("   sandbox pod %s is selected by NetworkPolicy %s (podSelector %v); probe pods carry those labels\n", sandbox.Name, netcheck.Names(nps), np.Spec.PodSelector.MatchLabels)
	allowed, mustFail := d.Targets()
	plan := netcheck.Plan{
		Namespace: fixture.Namespace, Selector: np.Spec.PodSelector.MatchLabels, PodLabels: sandbox.Labels, ServiceAccount: fixture.SandboxSA,
		Allowed: allowed, MustFail: mustFail,
	}
	start := time.Now()
	r, err := netcheck.Run(ctx, kube, plan)
	if err != nil {
		s.failErr("5", "network probes", err)
		return
	}
	s.net = r
	fmt.Printf("   3 probe pods in %s\n", time.Since(start).Round(time.Millisecond))
	s.line("5a", "canary: a control pod no policy selects reaches every target", r.CanaryOK(), "\n       "+describe(r.Canary),
		"a target the canary cannot reach proves nothing when the sandbox cannot either")
	s.line("5b", "the sandbox reaches custody by DNS and not the store, the API server, another namespace, custody's metrics/admin ports",
		r.CanaryOK() && r.SandboxOK(allowed), "\n       "+describe(r.Sandbox), "want only the custody API and gateway connected")
	st, _ := netcheck.Find(r.Relaxed, incluster.TStore)
	s.line("5c", "causality: with an extra allow-all-egress policy on the same pods the store (and every blocked target) connects", st.Connected && r.RelaxedOK(),
		"\n       "+describe(r.Relaxed), "the policy, not the path, must be what blocked it")
}

// providerCheck is G2, from check 5's probes.
func (s *scenario) providerCheck() {
	if s.net == nil {
		s.line("G2", "egress from the sandbox straight to the provider", false, "check 5's probes did not run", "")
		return
	}
	c, _ := netcheck.Find(s.net.Canary, incluster.TProvider)
	sb, _ := netcheck.Find(s.net.Sandbox, incluster.TProvider)
	rl, _ := netcheck.Find(s.net.Relaxed, incluster.TProvider)
	s.line("G2", "egress from the sandbox straight to the provider stand-in (its pod IP) is blocked", c.Connected && sb.Blocked() && rl.Connected,
		fmt.Sprintf("canary: %s; sandbox: %s; sandbox with egress relaxed: %s", c.Observed, sb.Observed, rl.Observed),
		"want the canary and the relaxed probe connected, the sandbox not")
}

func describe(os []netcheck.Outcome) string {
	var b strings.Builder
	for i, o := range os {
		if i > 0 {
			b.WriteString("\n       ")
		}
		fmt.Fprintf(&b, "%-32s %-44s %s", o.Name, o.Addr, o.Observed)
	}
	return b.String()
}
