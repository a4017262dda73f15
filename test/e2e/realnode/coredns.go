package realnode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Corefile serves cluster.local from the API (kubernetes plugin) and
// nothing else: there is no forward plugin (it is not even built in), so
// no query leaves the machine.
const Corefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
}
`

// startDNS applies CoreDNS (ServiceAccount, ClusterRole and binding,
// Corefile ConfigMap, a pod labelled k8s-app: kube-dns, Service kube-dns at
// DNSServiceIP) and polls a lookup through the Service IP until it
// answers.
func (c *Cluster) startDNS(ctx context.Context) error {
	kube := c.CP.Kube
	ns := metav1.NamespaceSystem
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta("coredns")}, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("realnode: coredns: %w", err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("realnode: coredns: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "coredns", Namespace: ns}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("realnode: coredns: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta("coredns"), Data: map[string]string{"Corefile": Corefile}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("realnode: coredns: %w", err)
	}
	pod := &corev1.Pod{ObjectMeta: meta("coredns"), Spec: corev1.PodSpec{
		ServiceAccountName: "coredns",
		DNSPolicy:          corev1.DNSDefault,
		Containers: []corev1.Container{{
			Name: "coredns", Image: CoreDNSImage, ImagePullPolicy: corev1.PullNever,
			Args:         []string{"-conf", "/etc/coredns/Corefile"},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			Ports: []corev1.ContainerPort{
				{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}}, PeriodSeconds: 1},
		}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}}}}},
	}}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("realnode: coredns pod: %w", err)
	}
	svc := &corev1.Service{ObjectMeta: meta("kube-dns"), Spec: corev1.ServiceSpec{
		ClusterIP: DNSServiceIP, Selector: labels,
		Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		},
	}}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("realnode: kube-dns service: %w", err)
	}
	return c.waitDNS(ctx, 60*time.Second)
}

// waitDNS runs a netprobe pod in kube-system that looks up
// kubernetes.default.svc.cluster.local through the pod's resolv.conf
// (nameserver DNSServiceIP, which kube-proxy DNATs to the CoreDNS pod on
// cni0) every 300 ms until it answers or timeout, and returns its
// observation. The lookup runs in a pod because the guard table drops host
// output to the service CIDR (it is routed to eth0 before any DNAT).
func (c *Cluster) waitDNS(ctx context.Context, timeout time.Duration) error {
	pods := c.CP.Kube.CoreV1().Pods(metav1.NamespaceSystem)
	name := "kubernetes.default.svc." + ClusterDomain
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dns-check", Namespace: metav1.NamespaceSystem}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "netprobe", Image: NetprobeImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"lookup", name, timeout.String()}}},
	}}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("realnode: dns-check pod: %w", err)
	}
	defer func() {
		_ = pods.Delete(context.WithoutCancel(ctx), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}()
	done, err := WaitPod(ctx, c.CP.Kube, p.Namespace, p.Name, timeout+30*time.Second, Finished)
	if err != nil {
		return fmt.Errorf("realnode: %w; kube-proxy log:\n%s", err, c.Host.Logs("kube-proxy", 2000))
	}
	msg := TerminationMessage(done)
	if done.Status.Phase != corev1.PodSucceeded {
		return fmt.Errorf("realnode: no DNS answer through %s: %s; kube-proxy log:\n%s", DNSServiceIP, msg, c.Host.Logs("kube-proxy", 2000))
	}
	fmt.Fprintf(c.progress, "realnode: from a pod: %s\n", msg)
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
