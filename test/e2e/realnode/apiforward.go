package realnode

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/node"
)

// APIForwarderPod is the pod (namespace kube-system) that pods reach the
// API server through.
const APIForwarderPod = "apiserver-forwarder"

// forwardAPIFromPod moves Service default/kubernetes from the bridge
// address to a pod: netprobe forward :6443 -> [node.BridgeIP]:PodAPIPort.
//
// Why: traffic from a pod to the node's own address is delivered locally
// and never reaches kube-network-policies, which polices in the
// postrouting hook (forwarded traffic). In a real cluster the API server
// sits on other machines, so a sandbox's NetworkPolicy does apply to it;
// the forwarder pod gives the API server an address on the pod network,
// where the policy applies as it would there. The same holds for the
// store (test/e2e/incluster).
func (c *Cluster) forwardAPIFromPod(ctx context.Context) error {
	kube := c.CP.Kube
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: APIForwarderPod, Namespace: metav1.NamespaceSystem}}
	if _, err := kube.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Create(ctx, sa, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("realnode: %s: %w", APIForwarderPod, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: APIForwarderPod, Namespace: metav1.NamespaceSystem,
		Labels: map[string]string{"app": APIForwarderPod}}, Spec: corev1.PodSpec{
		ServiceAccountName:            APIForwarderPod,
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "forward", Image: NetprobeImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"forward", ":" + PodAPIPort, node.BridgeIP + ":" + PodAPIPort}}},
	}}
	if _, err := kube.CoreV1().Pods(metav1.NamespaceSystem).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("realnode: %s: %w", APIForwarderPod, err)
	}
	p, err := WaitPod(ctx, kube, metav1.NamespaceSystem, APIForwarderPod, 60*time.Second, Running)
	if err != nil {
		return err
	}
	if err := c.CP.SetKubernetesEndpoint(ctx, p.Status.PodIP, 6443); err != nil {
		return err
	}
	c.CP.OnlyPodAPIFrom(net.ParseIP(p.Status.PodIP))
	fmt.Fprintf(c.progress, "realnode: pods reach the API server through pod %s (%s:6443 -> %s:%s)\n", APIForwarderPod, p.Status.PodIP, node.BridgeIP, PodAPIPort)
	return nil
}
