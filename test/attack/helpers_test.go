package attack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func claimPod(t *testing.T, ctx context.Context, name string) *corev1.Pod {
	t.Helper()
	if err := env.CreateClaim(ctx, name); err != nil {
		t.Fatalf("CreateClaim(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = env.DeleteClaim(context.Background(), name) })
	pod, err := env.ClaimPod(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func podToken(t *testing.T, ctx context.Context, pod *corev1.Pod) string {
	t.Helper()
	tok, err := env.PodToken(ctx, pod, fixture.Audience)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func exchange(t *testing.T, ctx context.Context, url, token string) fixture.Response {
	t.Helper()
	r, err := fixture.Exchange(ctx, url, token)
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return r
}

func keyOf(t *testing.T, r fixture.Response) apikey.ExchangeResponse {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("exchange = %s, want 200", r)
	}
	var k apikey.ExchangeResponse
	if err := r.JSON(&k); err != nil {
		t.Fatal(err)
	}
	return k
}

func do(t *testing.T, ctx context.Context, method, url, key string, body any, hdr ...string) fixture.Response {
	t.Helper()
	r, err := fixture.Do(ctx, method, url, key, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func memURL(tenant, agent string) string {
	return custody.URL + "/v1/memory/" + tenant + "/" + agent
}

func errorCode(r fixture.Response) string {
	var b struct{ Error string }
	_ = r.JSON(&b)
	return b.Error
}

func epochOf(t *testing.T, r fixture.Response) int64 {
	t.Helper()
	var g struct{ Epoch int64 }
	if r.Status != 200 || r.JSON(&g) != nil {
		t.Fatalf("lease = %s", r)
	}
	return g.Epoch
}

// restrictedClient creates service account name in the tenant namespace
// with exactly rules, and returns clients that act as it.
func restrictedClient(t *testing.T, ctx context.Context, name string, rules []rbacv1.PolicyRule) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	kube := env.CP.Kube
	ns := fixture.Namespace
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
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
	k, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC caches: wait until a create is authorized
	time.Sleep(500 * time.Millisecond)
	return k, d
}

func pretty(v any) string { b, _ := json.Marshal(v); return string(b) }

var _ = os.Getenv
var _ = fmt.Sprint
