// Command realnode-check brings up a real node with test/e2e/realnode,
// runs pods on it, proves NetworkPolicy enforcement and tears down,
// printing what it observed and the times. Linux and root only; run from
// the module root:
//
//	go run ./test/e2e/cmd/realnode-check
//
// In namespace realnode-check it starts a server pod (netprobe serve :8080)
// and, each as a pod of its own that dials the server's pod IP on cni0:
// a canary with no policy (must connect), the same through Service
// "server" by its DNS name (CoreDNS + kube-proxy; up to 3 tries, as a new
// Service is programmed asynchronously), then under a NetworkPolicy
// that admits only pods labelled role=allowed, an allowed probe (must
// connect) and a denied probe (must not), then the policy deleted and the
// denied probe again (must connect: the policy caused the block). Every
// address is a pod IP on cni0; nothing leaves the machine.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/agentcustody/custody/test/e2e/realnode"
)

const ns = "realnode-check"

// probeTimeout is each dial's limit. A new pod's first SYN may be dropped
// while the policy agent has not yet learnt its IP (no NRI on containerd
// 1.6; issues.k8s.io/85966): an allowed probe was seen connecting after
// 1.03 s, on the SYN retransmitted at 1 s. 4 s covers the retransmits at
// 1 s and 3 s.
const probeTimeout = "4s"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "realnode-check: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("realnode-check: PASS")
}

func run(ctx context.Context) (err error) {
	c, err := realnode.Start(ctx, realnode.Options{Progress: os.Stdout})
	if err != nil {
		return err
	}
	fmt.Printf("time: clean -> node Ready %s; Ready -> DNS answering %s\n", c.NodeReady.Round(time.Millisecond), c.DNSReady.Round(time.Millisecond))
	defer func() {
		start := time.Now()
		derr := c.Stop(context.WithoutCancel(ctx))
		fmt.Printf("time: teardown %s (err=%v)\n", time.Since(start).Round(time.Millisecond), derr)
		if err == nil {
			err = derr
		}
	}()
	return check(ctx, c.CP.Kube)
}

func check(ctx context.Context, kube kubernetes.Interface) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitSA(ctx, kube); err != nil {
		return err
	}
	start := time.Now()
	srv := pod("server", map[string]string{"app": "server"}, corev1.RestartPolicyAlways, "serve", ":8080")
	srv.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstrPort(8080)}}, PeriodSeconds: 1}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, srv, metav1.CreateOptions{}); err != nil {
		return err
	}
	p, err := realnode.WaitPod(ctx, kube, ns, "server", 60*time.Second, realnode.Running)
	if err != nil {
		return err
	}
	fmt.Printf("time: pod create -> Running %s; pod server Running on %s, IP %s, image %s\n", time.Since(start).Round(time.Millisecond), p.Spec.NodeName, p.Status.PodIP, p.Spec.Containers[0].Image)
	if _, err := realnode.WaitPod(ctx, kube, ns, "server", 60*time.Second, realnode.Ready); err != nil {
		return err
	}
	fmt.Printf("time: pod create -> Ready %s\n", time.Since(start).Round(time.Millisecond))
	// Logs go API server -> kubelet on 127.0.0.1:10250 (node address
	// Hostname "vm" resolves to loopback here).
	logs, err := kube.CoreV1().Pods(ns).GetLogs("server", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("server logs through the API: %w", err)
	}
	fmt.Printf("server logs through the API: %q\n", logs)
	target := p.Status.PodIP + ":8080"

	if err := probe(ctx, kube, "canary", nil, target, true); err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "server"},
		Ports:    []corev1.ServicePort{{Port: 8080, TargetPort: intstrPort(8080)}},
	}}
	if svc, err = kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Printf("service server: ClusterIP %s\n", svc.Spec.ClusterIP)
	// By name: CoreDNS answers, kube-proxy DNATs the ClusterIP to the pod.
	// A new Service is programmed asynchronously; retry on a miss.
	byName := "server." + ns + ".svc.cluster.local:8080"
	for try := 1; ; try++ {
		err := probe(ctx, kube, fmt.Sprintf("by-service-%d", try), nil, byName, true)
		if err == nil {
			break
		}
		if try == 3 {
			return err
		}
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "server-only-allowed", Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "allowed"}}}}}},
	}}
	if _, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Println("policy server-only-allowed applied: ingress to app=server only from role=allowed")
	if err := probe(ctx, kube, "allowed", map[string]string{"role": "allowed"}, target, true); err != nil {
		return err
	}
	if err := probe(ctx, kube, "denied", nil, target, false); err != nil {
		return err
	}
	if err := kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	fmt.Println("policy deleted")
	return probe(ctx, kube, "denied-after-delete", nil, target, true)
}

// probe runs one netprobe dial pod and checks its outcome.
func probe(ctx context.Context, kube kubernetes.Interface, name string, labels map[string]string, target string, want bool) error {
	start := time.Now()
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod(name, labels, corev1.RestartPolicyNever, "dial", target, probeTimeout), metav1.CreateOptions{}); err != nil {
		return err
	}
	p, err := realnode.WaitPod(ctx, kube, ns, name, 60*time.Second, realnode.Finished)
	if err != nil {
		return err
	}
	got := p.Status.Phase == corev1.PodSucceeded
	msg := realnode.TerminationMessage(p)
	verdict := "ok"
	if got != want {
		verdict = "UNEXPECTED"
	}
	fmt.Printf("probe %-20s labels=%v -> %s: connected=%v (want %v) %s [%s]\n", name, labels, target, got, want, verdict, time.Since(start).Round(time.Millisecond))
	fmt.Printf("    observed: %s\n", msg)
	if got != want {
		return fmt.Errorf("probe %s: connected=%v, want %v", name, got, want)
	}
	return nil
}

func pod(name string, labels map[string]string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: corev1.PodSpec{
		RestartPolicy:                 restart,
		TerminationGracePeriodSeconds: new(int64),
		Containers:                    []corev1.Container{{Name: "netprobe", Image: realnode.NetprobeImage, ImagePullPolicy: corev1.PullNever, Args: args}},
	}}
}

// waitSA waits for the namespace's default ServiceAccount (pods are
// refused until it exists).
func waitSA(ctx context.Context, kube kubernetes.Interface) error {
	for i := 0; i < 100; i++ {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no default ServiceAccount in %s", ns)
}

func intstrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }
