package attack

import (
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

var (
	sandboxGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	claimGVR   = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// A principal that may only create pods (and read sandboxes) in the tenant
// namespace crafts a pod whose controller ownerReference names the
// victim's Sandbox (with its real UID). custody attests it as the victim's
// claim.
func TestForgedPodOwnerReference(t *testing.T) {
	ctx := testCtx(t)
	victimPod := claimPod(t, ctx, "victim-a")
	vk := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, victimPod)))
	r := do(t, ctx, "POST", memURL(vk.Tenant, vk.Agent)+"/memories", vk.Key, map[string]any{"kind": "secret", "text": "victim password hunter2"})
	if r.Status != 201 {
		t.Fatalf("victim remember: %s", r)
	}
	ref := metav1.GetControllerOf(victimPod)
	t.Logf("victim pod %s controlled by %s %s uid=%s", victimPod.Name, ref.Kind, ref.Name, ref.UID)

	kube, _ := restrictedClient(t, ctx, "pod-creator", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"get", "list"}},
	})
	forged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "evil-pod",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: ref.Name, UID: ref.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{ServiceAccountName: "pod-creator",
			Containers: []corev1.Container{{Name: "c", Image: "evil"}}},
	}
	p, err := kube.CoreV1().Pods(fixture.Namespace).Create(ctx, forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("API server refused the forged pod: %v", err)
	}
	t.Cleanup(func() {
		_ = env.CP.Kube.CoreV1().Pods(fixture.Namespace).Delete(ctx, "evil-pod", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	t.Logf("API server accepted pod %s (sa %s) with controller ref to Sandbox %s", p.Name, p.Spec.ServiceAccountName, ref.Name)
	// What the kubelet would project into the pod.
	tok := podToken(t, ctx, p)
	r = exchange(t, ctx, custody.URL, tok)
	t.Logf("forged pod exchange: %s", r)
	if r.Status != http.StatusOK {
		t.Logf("HELD: forged pod refused")
		return
	}
	ek := keyOf(t, r)
	t.Logf("VULN: forged pod got key for tenant=%s agent=%s session=%s", ek.Tenant, ek.Agent, ek.Session)
	r = do(t, ctx, "GET", memURL(ek.Tenant, ek.Agent)+"/memories", ek.Key, nil)
	t.Logf("forged pod reads victim memories: %s", r)
	// Does the forged pod survive a while (GC / sandbox controller)?
	time.Sleep(5 * time.Second)
	if _, err := env.CP.Kube.CoreV1().Pods(fixture.Namespace).Get(ctx, "evil-pod", metav1.GetOptions{}); err == nil {
		t.Logf("forged pod still exists after 5s")
	} else {
		t.Logf("forged pod gone: %v", err)
	}
	r = exchange(t, ctx, custody.URL, tok)
	t.Logf("forged pod exchange after 5s: %d", r.Status)
	vp, err := env.CP.Kube.CoreV1().Pods(fixture.Namespace).Get(ctx, victimPod.Name, metav1.GetOptions{})
	t.Logf("victim pod after: err=%v uid same=%v", err, err == nil && vp.UID == victimPod.UID)
}

// A principal that may create Sandboxes (the core agent-sandbox resource)
// but not claims creates a Sandbox controlled by the victim's SandboxClaim.
func TestForgedSandboxOwnerReference(t *testing.T) {
	ctx := testCtx(t)
	victimPod := claimPod(t, ctx, "victim-b")
	vk := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, victimPod)))
	do(t, ctx, "POST", memURL(vk.Tenant, vk.Agent)+"/memories", vk.Key, map[string]any{"kind": "secret", "text": "victim-b secret"})
	claim, err := env.CP.Dynamic.Resource(claimGVR).Namespace(fixture.Namespace).Get(ctx, "victim-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, dyn := restrictedClient(t, ctx, "sandbox-creator", []rbacv1.PolicyRule{
		{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"create", "get", "list"}},
		{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxclaims"}, Verbs: []string{"get", "list"}},
	})
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "evil-sandbox", "namespace": fixture.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
				"name": "victim-b", "uid": string(claim.GetUID()), "controller": true,
			}}},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"serviceAccountName": "agent",
			"containers":         []any{map[string]any{"name": "c", "image": "evil"}},
		}}},
	}}
	if _, err := dyn.Resource(sandboxGVR).Namespace(fixture.Namespace).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("API server refused forged sandbox: %v", err)
	}
	t.Cleanup(func() {
		_ = env.CP.Dynamic.Resource(sandboxGVR).Namespace(fixture.Namespace).Delete(ctx, "evil-sandbox", metav1.DeleteOptions{})
	})
	var pod *corev1.Pod
	for i := 0; i < 100; i++ {
		pod, err = env.SandboxPod(ctx, "evil-sandbox")
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if pod == nil {
		t.Logf("HELD?: controller made no pod for forged sandbox: %v", err)
		return
	}
	r := exchange(t, ctx, custody.URL, podToken(t, ctx, pod))
	t.Logf("pod %s of forged sandbox exchange: %s", pod.Name, r)
	if r.Status == 200 {
		ek := keyOf(t, r)
		rr := do(t, ctx, "GET", memURL(ek.Tenant, ek.Agent)+"/memories", ek.Key, nil)
		t.Logf("VULN: reads victim memories: %s", rr)
	}
	time.Sleep(5 * time.Second)
	_, err = env.CP.Dynamic.Resource(sandboxGVR).Namespace(fixture.Namespace).Get(ctx, "evil-sandbox", metav1.GetOptions{})
	t.Logf("forged sandbox after 5s: err=%v", err)
	c2, _ := env.CP.Dynamic.Resource(claimGVR).Namespace(fixture.Namespace).Get(ctx, "victim-b", metav1.GetOptions{})
	st, _, _ := unstructured.NestedString(c2.Object, "status", "sandbox", "name")
	t.Logf("claim status.sandbox.name=%s", st)
	_ = strings.Contains
}
