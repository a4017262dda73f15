package incluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/node"
	"github.com/agentcustody/custody/test/e2e/realnode"
)

// peers starts the provider stand-in and the other namespace's server,
// each a pod with a Service, and waits until both run.
func (d *Deployment) peers(ctx context.Context, env *fixture.Env) error {
	kube := d.cluster.CP.Kube
	for _, ns := range []string{StoreNS, ProviderNS, OtherNS} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("incluster: namespace %s: %w", ns, err)
		}
	}
	if err := waitDefaultSA(ctx, env, StoreNS, ProviderNS, OtherNS); err != nil {
		return err
	}
	provider, err := d.serverPod(ctx, ProviderNS, "provider", ProviderImage, ProviderPort, []string{fmt.Sprintf(":%d", ProviderPort)}, nil)
	if err != nil {
		return err
	}
	other, err := d.serverPod(ctx, OtherNS, "server", realnode.NetprobeImage, ProviderPort, []string{"serve", fmt.Sprintf(":%d", ProviderPort)}, nil)
	if err != nil {
		return err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	d.mcpCredential = hex.EncodeToString(raw[:])
	mcpPod, err := d.serverPod(ctx, OtherNS, "mcp", realnode.NetprobeImage, MCPPort, []string{"mcp-serve", fmt.Sprintf(":%d", MCPPort)},
		map[string]string{"MCP_CREDENTIAL": d.mcpCredential})
	if err != nil {
		return err
	}
	d.MCPIP = mcpPod.Status.PodIP
	d.MCPCallsURL = fmt.Sprintf("http://%s:%d/calls", d.MCPIP, MCPPort)
	d.mcpURL = fmt.Sprintf("http://mcp.%s.svc.cluster.local:%d/mcp", OtherNS, MCPPort)
	d.ProviderIP, d.OtherIP = provider.Status.PodIP, other.Status.PodIP
	d.ProviderURL = fmt.Sprintf("http://provider.%s.svc.cluster.local:%d", ProviderNS, ProviderPort)
	d.step("peers: provider stand-in pod %s (Service %s), namespace %s server pod %s and MCP server pod %s (Service %s)", d.ProviderIP, d.ProviderURL, OtherNS, d.OtherIP, d.MCPIP, d.mcpURL)
	return nil
}

// serverPod creates pod name (label app=name, environment env) and its
// Service on port, and waits until the pod is Ready.
func (d *Deployment) serverPod(ctx context.Context, ns, name, image string, port int32, args []string, env map[string]string) (*corev1.Pod, error) {
	kube := d.cluster.CP.Kube
	lbl := map[string]string{"app": name}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: new(int64),
		AutomountServiceAccountToken:  ptr.To(false),
		Containers: []corev1.Container{{
			Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Args: args, Env: envVars(env),
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}},
		}},
	}}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("incluster: pod %s/%s: %w", ns, name, err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: lbl,
		Ports:    []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}},
	}}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("incluster: service %s/%s: %w", ns, name, err)
	}
	return realnode.WaitPod(ctx, kube, ns, name, 60*time.Second, realnode.Ready)
}

// storeService is Service custody-store/postgres:5432 on a pod that
// forwards to the harness's bridge forwarder (see realnode's
// forwardAPIFromPod for why the store needs an address on the pod
// network).
func (d *Deployment) storeService(ctx context.Context) (*corev1.Pod, error) {
	return d.serverPod(ctx, StoreNS, "postgres", realnode.NetprobeImage, 5432,
		[]string{"forward", ":5432", fmt.Sprintf("%s:%d", node.BridgeIP, storeFwdPort)}, nil)
}

// waitDefaultSA waits for each namespace's default ServiceAccount (pods
// are refused until it exists).
func waitDefaultSA(ctx context.Context, env *fixture.Env, namespaces ...string) error {
	for _, ns := range namespaces {
		err := fixture.Poll(ctx, 30*time.Second, func() (bool, error) {
			_, err := env.CP.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("incluster: default ServiceAccount in %s: %w", ns, err)
		}
	}
	return nil
}

// redactURL drops the password from a database URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func envVars(m map[string]string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for k, v := range m {
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out
}
