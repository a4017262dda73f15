package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

func stateURL(tenant, agent, name string) string {
	return custody.URL + "/v1/memory/" + tenant + "/" + agent + "/state/" + name
}

func do(t *testing.T, ctx context.Context, method, url, key string, body any, hdr ...string) fixture.Response {
	t.Helper()
	r, err := fixture.Do(ctx, method, url, key, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLeaseFencingAcrossPods: a pod left behind by a deleted claim (no
// garbage collection) still holds the lease and a key minted before the
// delete. The re-created claim's pod is refused the lease while that pod
// lives, takes it over once the pod is gone, and the old holder's writes
// are then fenced off by the epoch.
func TestLeaseFencingAcrossPods(t *testing.T) {
	ctx := testCtx(t)
	if err := env.CP.StopComponent("kube-controller-manager"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.CP.StartComponent("kube-controller-manager"); err != nil {
			t.Error(err)
		}
	})
	podA := claimPod(t, ctx, "fenced")
	kA := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, podA)))
	url := stateURL(kA.Tenant, kA.Agent, "work")
	r := do(t, ctx, "POST", url+"/lease", kA.Key, nil)
	var la struct{ Epoch int64 }
	if r.Status != http.StatusOK || r.JSON(&la) != nil || la.Epoch < 1 {
		t.Fatalf("A takes the lease = %s, want 200 with an epoch", r)
	}
	if r := do(t, ctx, "PUT", url, kA.Key, []byte(`{"a":1}`), "Lease-Epoch", fmt.Sprint(la.Epoch), "If-Match", "0"); r.Status != http.StatusOK {
		t.Fatalf("A writes = %s, want 200", r)
	}

	if err := env.DeleteClaim(ctx, "fenced"); err != nil {
		t.Fatal(err)
	}
	podB := claimPod(t, ctx, "fenced")
	kB := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, podB)))
	if kB.Agent != kA.Agent || kB.Session == kA.Session {
		t.Fatalf("B identity %s/%s, want same agent as A, other session", kB.Agent, kB.Session)
	}

	r = do(t, ctx, "POST", url+"/lease", kB.Key, nil)
	if r.Status != http.StatusConflict || errorCode(r) != "lease_held" {
		t.Fatalf("B takes the lease while A's pod lives = %s, want 409 lease_held", r)
	}

	// The garbage collector would delete A's pod; do it directly.
	if err := env.CP.Kube.CoreV1().Pods(podA.Namespace).Delete(ctx, podA.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitPodGone(ctx, podA); err != nil {
		t.Fatal(err)
	}
	r = do(t, ctx, "POST", url+"/lease", kB.Key, nil)
	var lb struct {
		Epoch, Version int64
		State          map[string]int
	}
	if r.Status != http.StatusOK || r.JSON(&lb) != nil || lb.Epoch <= la.Epoch || lb.State["a"] != 1 {
		t.Fatalf("B takes over after A's pod is gone = %s, want 200, epoch > %d, state {a:1}", r, la.Epoch)
	}

	// A still has a live key (minted before the delete) but a stale epoch.
	r = do(t, ctx, "PUT", url, kA.Key, []byte(`{"a":2}`), "Lease-Epoch", fmt.Sprint(la.Epoch), "If-Match", fmt.Sprint(lb.Version))
	if r.Status != http.StatusConflict || errorCode(r) != "lease_lost" {
		t.Fatalf("A writes with its stale epoch = %s, want 409 lease_lost", r)
	}
	r = do(t, ctx, "PUT", url, kB.Key, []byte(`{"b":1}`), "Lease-Epoch", fmt.Sprint(lb.Epoch), "If-Match", fmt.Sprint(lb.Version))
	if r.Status != http.StatusOK {
		t.Fatalf("B writes = %s, want 200", r)
	}
	r = do(t, ctx, "PUT", url, kB.Key, []byte(`{"b":2}`), "Lease-Epoch", fmt.Sprint(lb.Epoch), "If-Match", fmt.Sprint(lb.Version))
	if r.Status != http.StatusPreconditionFailed || errorCode(r) != "version_conflict" {
		t.Fatalf("B writes with a stale version = %s, want 412 version_conflict", r)
	}
}

func TestNamespaceMismatch(t *testing.T) {
	ctx := testCtx(t)
	pod := claimPod(t, ctx, "nsowner")
	k := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, pod)))
	for _, tc := range []struct{ name, tenant, agent string }{
		{"other agent", k.Tenant, "someone-else"},
		{"other tenant", "other-tenant", k.Agent},
		{"both", "other-tenant", "someone-else"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []struct{ method, url string }{
				{"GET", memoriesURL(custody.URL, tc.tenant, tc.agent)},
				{"POST", memoriesURL(custody.URL, tc.tenant, tc.agent)},
				{"GET", stateURL(tc.tenant, tc.agent, "x")},
				{"POST", stateURL(tc.tenant, tc.agent, "x") + "/lease"},
				{"PUT", stateURL(tc.tenant, tc.agent, "x")},
				{"DELETE", memoriesURL(custody.URL, tc.tenant, tc.agent) + "/abc"},
			} {
				r := do(t, ctx, req.method, req.url, k.Key, map[string]string{"kind": "fact", "text": "x"}, "Lease-Epoch", "1", "If-Match", "0")
				if r.Status != http.StatusForbidden || errorCode(r) != "namespace_mismatch" {
					t.Errorf("%s %s = %s, want 403 namespace_mismatch", req.method, req.url, r)
				}
			}
		})
	}
}

func errorCode(r fixture.Response) string {
	var b struct{ Error string }
	_ = r.JSON(&b)
	return b.Error
}
