// Package netcheck runs the seeds' network checks on a real node as checks
// that can fail (seed 002): netprobe `connect` pods dial a list of
// targets at once, and each target's outcome (connected, refused,
// timeout, error) is read from the pod's termination message.
//
// A [Plan] is judged in three steps, all with the same targets:
//
//  1. canary: a control pod no policy selects must connect to every
//     target, so a blocked target later is blocked by the policy, not
//     unreachable anyway;
//  2. paired probes: a pod the sandbox's NetworkPolicy selects must
//     connect to each Allowed target and must not connect to any
//     MustFail target;
//  3. causality: with an extra policy that allows all egress from the
//     same pods, the MustFail targets connect again (NetworkPolicies are
//     additive, so this relaxes the sandbox's policy without editing the
//     one its controller owns); the extra policy is then deleted.
package netcheck

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/realnode"
)

// Timeout is each dial's limit inside a probe pod: a new pod's first SYN
// may be dropped while the policy agent learns its address (no NRI on
// containerd 1.6), and the kernel retransmits at 1 s and 3 s.
const Timeout = 5 * time.Second

// Settle is how long a probe pod waits before it dials. The policy agent
// learns a new pod's address from the API (no NRI on containerd 1.6), and
// until it has, the pod's packets match no policy and pass: a probe that
// dials at once measures that window, not the policy (see the closing
// note of issue 9 for what the demo saw). A sandbox's agent process has
// the same window at its own start.
const Settle = 3 * time.Second

// Target is one address to dial, with a name for the report.
type Target struct {
	Name string // e.g. "store (PostgreSQL)"
	Addr string // host:port; a DNS name is resolved in the pod
}

// Plan is what to probe and from where.
type Plan struct {
	Namespace string
	// Selector is the sandbox NetworkPolicy's podSelector.matchLabels;
	// the probe pod carries exactly these labels.
	Selector map[string]string
	// PodLabels are the real sandbox pod's labels. Run refuses to probe
	// unless the probe pods (carrying Selector) are selected by exactly
	// the policies that select a pod with PodLabels: a probe that misses
	// a policy selecting the sandbox through another label (an allow-all
	// one, say) would report a confinement the sandbox does not have.
	PodLabels map[string]string
	// ServiceAccount of the probe pods (the sandbox's). The token is not
	// mounted.
	ServiceAccount    string
	Allowed, MustFail []Target
}

// Outcome is one target's result in one probe.
type Outcome struct {
	Target
	Connected bool
	Observed  string // netprobe's line, e.g. "timeout after 5s"
}

// Report is a whole check.
type Report struct {
	Canary, Sandbox, Relaxed []Outcome
	// Policy names the policies selecting the sandbox pods.
	Policy string
}

// Run performs the three steps. It returns an error only when a probe
// could not run at all; verdicts are for the caller (see [Report]).
func Run(ctx context.Context, kube kubernetes.Interface, p Plan) (*Report, error) {
	all := append(append([]Target{}, p.Allowed...), p.MustFail...)
	r := &Report{}
	if err := checkLabels(ctx, kube, p); err != nil {
		return r, err
	}
	var err error
	if r.Canary, err = probe(ctx, kube, p, "netcheck-canary", canaryLabels, all); err != nil {
		return r, err
	}
	if r.Sandbox, err = probe(ctx, kube, p, "netcheck-sandbox", p.Selector, all); err != nil {
		return r, err
	}
	relax := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "netcheck-relax-egress", Namespace: p.Namespace}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: p.Selector},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{}},
	}}
	if _, err := kube.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, relax, metav1.CreateOptions{}); err != nil {
		return r, fmt.Errorf("netcheck: relax policy: %w", err)
	}
	r.Relaxed, err = probe(ctx, kube, p, "netcheck-relaxed", p.Selector, p.MustFail)
	if derr := kube.NetworkingV1().NetworkPolicies(p.Namespace).Delete(context.WithoutCancel(ctx), relax.Name, metav1.DeleteOptions{}); derr != nil && err == nil {
		err = fmt.Errorf("netcheck: delete relax policy: %w", derr)
	}
	return r, err
}

// canaryLabels are the control pod's; no policy may select them.
var canaryLabels = map[string]string{"role": "netcheck-control"}

// checkLabels refuses a plan whose probes would not stand for the
// sandbox: an empty Selector (the relax policy would then select every
// pod in the namespace, the real sandboxes included), a canary some
// policy selects, or probe pods selected by other policies than the
// sandbox pod.
func checkLabels(ctx context.Context, kube kubernetes.Interface, p Plan) error {
	if len(p.Selector) == 0 {
		return fmt.Errorf("netcheck: empty Selector: the probe pods would not carry the sandbox policy's labels")
	}
	if nps, err := SelectingPolicies(ctx, kube, p.Namespace, canaryLabels); err != nil {
		return err
	} else if len(nps) > 0 {
		return fmt.Errorf("netcheck: the canary is selected by NetworkPolicy %s", Names(nps))
	}
	if p.PodLabels == nil {
		return fmt.Errorf("netcheck: no PodLabels: cannot tell the probe pods stand for the sandbox pod")
	}
	probe, err := SelectingPolicies(ctx, kube, p.Namespace, p.Selector)
	if err != nil {
		return err
	}
	pod, err := SelectingPolicies(ctx, kube, p.Namespace, p.PodLabels)
	if err != nil {
		return err
	}
	if Names(probe) != Names(pod) {
		return fmt.Errorf("netcheck: probe pods (labels %v) are selected by NetworkPolicies [%s], the sandbox pod by [%s]", p.Selector, Names(probe), Names(pod))
	}
	return nil
}

// SelectingPolicies names the NetworkPolicies in ns whose podSelector
// matches labels.
func SelectingPolicies(ctx context.Context, kube kubernetes.Interface, ns string, labels map[string]string) ([]networkingv1.NetworkPolicy, error) {
	l, err := kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []networkingv1.NetworkPolicy
	for _, np := range l.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err == nil && sel.Matches(k8slabels.Set(labels)) {
			out = append(out, np)
		}
	}
	return out, nil
}

// probe runs one connect pod and parses its termination message.
func probe(ctx context.Context, kube kubernetes.Interface, p Plan, name string, labels map[string]string, targets []Target) ([]Outcome, error) {
	args := []string{"connect", Timeout.String(), Settle.String()}
	for _, t := range targets {
		args = append(args, t.Addr)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: p.Namespace, Labels: labels}, Spec: corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		ServiceAccountName:            p.ServiceAccount,
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "netprobe", Image: realnode.NetprobeImage, ImagePullPolicy: corev1.PullNever, Args: args,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
	}}
	pods := kube.CoreV1().Pods(p.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("netcheck: pod %s: %w", name, err)
	}
	defer func() {
		_ = pods.Delete(context.WithoutCancel(ctx), created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	}()
	got, err := realnode.WaitPod(ctx, kube, p.Namespace, created.Name, 90*time.Second, realnode.Finished)
	if err != nil {
		return nil, err
	}
	return parse(realnode.TerminationMessage(got), targets)
}

// parse maps netprobe's "ADDR OUTCOME DETAIL" lines onto targets.
func parse(msg string, targets []Target) ([]Outcome, error) {
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		if addr, rest, ok := strings.Cut(l, " "); ok {
			lines[addr] = rest
		}
	}
	out := make([]Outcome, 0, len(targets))
	for _, t := range targets {
		obs, ok := lines[t.Addr]
		if !ok {
			return nil, fmt.Errorf("netcheck: no result for %s in %q", t.Addr, msg)
		}
		out = append(out, Outcome{Target: t, Connected: strings.HasPrefix(obs, "connected"), Observed: obs})
	}
	return out, nil
}

// Find returns the outcome for the target named name.
func Find(os []Outcome, name string) (Outcome, bool) {
	for _, o := range os {
		if o.Name == name {
			return o, true
		}
	}
	return Outcome{}, false
}

// Describe renders outcomes as "name: observed; ..." sorted as given.
func Describe(os []Outcome) string {
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = fmt.Sprintf("%s (%s) %s", o.Name, o.Addr, o.Observed)
	}
	return strings.Join(parts, "; ")
}

// Names returns the sorted policy names.
func Names(nps []networkingv1.NetworkPolicy) string {
	var n []string
	for _, np := range nps {
		n = append(n, np.Name)
	}
	sort.Strings(n)
	return strings.Join(n, ",")
}
