package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// claimPod creates claim name and returns its Ready pod; the claim is
// deleted when the test ends.
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

func wantRefused(t *testing.T, r fixture.Response, status int, code string) {
	t.Helper()
	var body struct{ Error, Message string }
	_ = r.JSON(&body)
	if r.Status != status || body.Error != code {
		t.Fatalf("exchange = %s, want %d %q", r, status, code)
	}
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

func TestWarmPoolPodRefusedUntilClaimed(t *testing.T) {
	ctx := testCtx(t)
	pod, err := env.WarmPoolPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok := podToken(t, ctx, pod)
	r := exchange(t, ctx, custody.URL, tok)
	wantRefused(t, r, http.StatusUnauthorized, "warm_pool")
	if !strings.Contains(string(r.Body), "still in warm pool") {
		t.Errorf("body = %s, want it to say still in warm pool", r.Body)
	}

	claimed := claimPod(t, ctx, "wp-claim")
	if claimed.UID != pod.UID {
		t.Fatalf("claim took pod %s, want the warm pod %s", claimed.Name, pod.Name)
	}
	k := keyOf(t, exchange(t, ctx, custody.URL, tok))
	if k.Tenant != fixture.Namespace || k.Agent != "wp-claim" || k.Session != pod.Name {
		t.Errorf("identity = %s:%s/%s, want %s:wp-claim/%s", k.Tenant, k.Agent, k.Session, fixture.Namespace, pod.Name)
	}
	if d := time.Until(k.ExpiresAt); d < 14*time.Minute || d > 15*time.Minute+time.Second {
		t.Errorf("expires in %v, want 15m", d)
	}
	if !strings.HasPrefix(k.Key, apikey.Prefix) {
		t.Errorf("key %q lacks prefix %q", k.Key[:3], apikey.Prefix)
	}
}

func TestTokenRefusals(t *testing.T) {
	ctx := testCtx(t)
	pod := claimPod(t, ctx, "refusals")
	kube := env.CP.Kube

	t.Run("wrong audience", func(t *testing.T) {
		tok, err := env.PodToken(ctx, pod, "not-custody")
		if err != nil {
			t.Fatal(err)
		}
		wantRefused(t, exchange(t, ctx, custody.URL, tok), 401, "unauthenticated")
	})
	t.Run("api server audience", func(t *testing.T) {
		tok, err := env.PodToken(ctx, pod, "https://kubernetes.default.svc.cluster.local")
		if err != nil {
			t.Fatal(err)
		}
		wantRefused(t, exchange(t, ctx, custody.URL, tok), 401, "unauthenticated")
	})
	t.Run("not bound to a pod", func(t *testing.T) {
		tr, err := kube.CoreV1().ServiceAccounts(fixture.Namespace).CreateToken(ctx, fixture.SandboxSA, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{fixture.Audience}, ExpirationSeconds: ptr.To(int64(600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantRefused(t, exchange(t, ctx, custody.URL, tr.Status.Token), 401, "unauthenticated")
	})
	t.Run("malformed", func(t *testing.T) {
		for _, tok := range []string{"x", "a.b", "not a jwt at all", strings.Repeat("a", 20000) + ".b.c", "e30.e30.e30"} {
			wantRefused(t, exchange(t, ctx, custody.URL, tok), 401, "unauthenticated")
		}
	})
}

func TestDeletedPodRefused(t *testing.T) {
	ctx := testCtx(t)
	pod := claimPod(t, ctx, "deleted-pod")
	tok := podToken(t, ctx, pod)
	keyOf(t, exchange(t, ctx, custody.URL, tok))
	if err := env.CP.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server still authenticates the bound token for a few
	// seconds (its own cache); custody must refuse at once.
	wantRefused(t, exchange(t, ctx, custody.URL, tok), 401, "unauthenticated")
}

func TestGracefullyDeletingPodRefused(t *testing.T) {
	ctx := testCtx(t)
	kube := env.CP.Kube
	// A pod bound to a node is deleted gracefully: it keeps existing with
	// a deletionTimestamp, and its token stays valid until that time plus
	// 60 s. No kubelet finalizes it here.
	pod, err := kube.CoreV1().Pods(fixture.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "graceful"},
		Spec: corev1.PodSpec{ServiceAccountName: fixture.SandboxSA, NodeName: "node-that-never-runs",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Pods(fixture.Namespace).Delete(context.Background(), "graceful", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	tok := podToken(t, ctx, pod)
	if err := kube.CoreV1().Pods(fixture.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(300))}); err != nil {
		t.Fatal(err)
	}
	got, err := kube.CoreV1().Pods(fixture.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("pod after graceful delete: %v, deletionTimestamp %v; want it terminating", err, got.DeletionTimestamp)
	}
	wantRefused(t, exchange(t, ctx, custody.URL, tok), 401, "unauthenticated")
}

func TestStalePodOfRecreatedClaimRefused(t *testing.T) {
	ctx := testCtx(t)
	old := claimPod(t, ctx, "recreated")
	tok := podToken(t, ctx, old)
	keyOf(t, exchange(t, ctx, custody.URL, tok))
	// Without garbage collection a deleted claim's Sandbox and pod stay
	// behind: stop the garbage collector, delete the claim, create it
	// again under the same name (a new UID).
	if err := env.CP.StopComponent("kube-controller-manager"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.CP.StartComponent("kube-controller-manager"); err != nil {
			t.Error(err)
		}
	})
	if err := env.DeleteClaim(ctx, "recreated"); err != nil {
		t.Fatal(err)
	}
	newPod := claimPod(t, ctx, "recreated")
	if newPod.UID == old.UID {
		t.Fatal("the re-created claim adopted the orphaned pod")
	}
	if _, err := env.CP.Kube.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("orphaned pod should still exist: %v", err)
	}
	wantRefused(t, exchange(t, ctx, custody.URL, tok), 401, "unauthenticated")
	k := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, newPod)))
	if k.Agent != "recreated" || k.Session != newPod.Name {
		t.Errorf("new pod identity = %s/%s, want recreated/%s", k.Agent, k.Session, newPod.Name)
	}
}

func TestOwnerReferenceV1alpha1(t *testing.T) {
	ctx := testCtx(t)
	pod := claimPod(t, ctx, "alpha-ref")
	// Owner references keep the apiVersion they were written with; rewrite
	// the pod's to v1alpha1 as on an object created before an upgrade.
	refs := pod.OwnerReferences
	for i := range refs {
		if refs[i].Kind == "Sandbox" {
			refs[i].APIVersion = "agents.x-k8s.io/v1alpha1"
		}
	}
	patch := map[string]any{"metadata": map[string]any{"ownerReferences": refs}}
	b, _ := jsonMarshal(patch)
	if _, err := env.CP.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	k := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, pod)))
	if k.Agent != "alpha-ref" {
		t.Errorf("agent = %q, want alpha-ref", k.Agent)
	}
}

func TestExchangeBurst(t *testing.T) {
	ctx := testCtx(t)
	pod := claimPod(t, ctx, "burst")
	tok := podToken(t, ctx, pod)
	const n = 200
	var wg sync.WaitGroup
	results := make([]fixture.Response, n)
	errs := make([]error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			results[i], errs[i] = fixture.Exchange(rctx, custody.URL, tok)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	ok, busy, limited := 0, 0, 0
	for i, r := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("exchange %d: %v (must never hang)", i, errs[i])
		case r.Status == 200:
			ok++
		case r.Status == 503 && r.Header.Get("Retry-After") != "":
			busy++
		case r.Status == 429 && r.Header.Get("Retry-After") != "" && errorCode(r) == "rate_limited":
			limited++
		default:
			t.Fatalf("exchange %d = %s, want 200, 503 or 429 with Retry-After", i, r)
		}
	}
	t.Logf("%d parallel exchanges from one pod: %d ok, %d busy (503), %d rate-limited (429), in %v", n, ok, busy, limited, elapsed)
	// One pod gets its burst of 20 keys (--exchange-pod-rate 60/min
	// refills one a second while the burst runs), the rest 429.
	if ok < 20 || ok > 20+int(elapsed/time.Second)+1 {
		t.Fatalf("%d keys minted for one pod in %v, want the burst of 20 plus one a second", ok, elapsed)
	}
	// At client-go's default 5 QPS, 200 exchanges of 4 API calls each
	// would take over two minutes.
	if elapsed > 40*time.Second {
		t.Errorf("burst took %v: exchanges are queueing behind a client rate limit", elapsed)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
