package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

var (
	sandboxGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	claimGVR   = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// tenantPrincipal creates a service account in the tenant namespace bound
// to exactly rules, and returns clients acting as it.
func tenantPrincipal(t *testing.T, ctx context.Context, name string, rules []rbacv1.PolicyRule) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	kube, ns := env.CP.Kube, fixture.Namespace
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, saObject(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(workDir, name+".kubeconfig")
	if err := env.SAKubeconfig(ctx, ns, name, kc, time.Hour); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc), dynamic.NewForConfigOrDie(rc)
}

// TestForgedPodOwnerReference: someone allowed only to create pods in the
// tenant namespace creates a pod whose controller reference names the
// victim's Sandbox with its real UID. The API server accepts it; custody
// must not attest it as the victim's claim.
func TestForgedPodOwnerReference(t *testing.T) {
	ctx := testCtx(t)
	victim := claimPod(t, ctx, "victim-pod")
	ref := metav1.GetControllerOf(victim)
	kube, _ := tenantPrincipal(t, ctx, "pod-creator", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}},
	})
	var forged *corev1.Pod
	err := fixture.Poll(ctx, 10*time.Second, func() (bool, error) { // RBAC caches settle
		p, err := kube.CoreV1().Pods(fixture.Namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "forged-pod", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: ref.Name, UID: ref.UID, Controller: ptr.To(true),
			}}},
			Spec: corev1.PodSpec{ServiceAccountName: "pod-creator", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{})
		forged = p
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("create forged pod: %v", err)
	}
	t.Cleanup(func() {
		_ = env.CP.Kube.CoreV1().Pods(fixture.Namespace).Delete(context.Background(), "forged-pod", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	wantRefused(t, exchange(t, ctx, custody.URL, podToken(t, ctx, forged)), http.StatusUnauthorized, "unauthenticated")
	// The victim is unaffected.
	keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, victim)))
}

// TestForgedSandboxOwnerReference: someone allowed to create Sandboxes
// (but not claims) creates one controlled by the victim's SandboxClaim.
// The controller builds a pod for it; custody must refuse that pod.
func TestForgedSandboxOwnerReference(t *testing.T) {
	ctx := testCtx(t)
	claimPod(t, ctx, "victim-sb")
	claim, err := env.CP.Dynamic.Resource(claimGVR).Namespace(fixture.Namespace).Get(ctx, "victim-sb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, dyn := tenantPrincipal(t, ctx, "sandbox-creator", []rbacv1.PolicyRule{
		{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"create"}},
	})
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "forged-sandbox", "namespace": fixture.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
				"name": "victim-sb", "uid": string(claim.GetUID()), "controller": true,
			}}},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"serviceAccountName": fixture.SandboxSA,
			"containers":         []any{map[string]any{"name": "c", "image": "x"}},
		}}},
	}}
	err = fixture.Poll(ctx, 10*time.Second, func() (bool, error) {
		_, err := dyn.Resource(sandboxGVR).Namespace(fixture.Namespace).Create(ctx, sb, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("create forged sandbox: %v", err)
	}
	t.Cleanup(func() {
		_ = env.CP.Dynamic.Resource(sandboxGVR).Namespace(fixture.Namespace).Delete(context.Background(), "forged-sandbox", metav1.DeleteOptions{})
	})
	var pod *corev1.Pod
	if err := fixture.Poll(ctx, 30*time.Second, func() (bool, error) {
		pod, err = env.SandboxPod(ctx, "forged-sandbox")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the controller made no pod for the forged Sandbox: %v", err)
	}
	wantRefused(t, exchange(t, ctx, custody.URL, podToken(t, ctx, pod)), http.StatusUnauthorized, "unauthenticated")
}
