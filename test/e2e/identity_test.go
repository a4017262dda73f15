package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

var (
	templateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	warmPoolGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
)

// ownPool creates service account sa, a copy of the "agent" template
// running as it and a warm pool of one on that template, all named sa,
// and returns the Ready pod of a claim named sa on that pool. Everything
// is deleted when the test ends; the shared "agent" account is untouched.
func ownPool(t *testing.T, ctx context.Context, sa string) *corev1.Pod {
	t.Helper()
	kube, dyn, ns := env.CP.Kube, env.CP.Dynamic, fixture.Namespace
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, saObject(sa), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().ServiceAccounts(ns).Delete(context.Background(), sa, metav1.DeleteOptions{}) })
	tmpl, err := dyn.Resource(templateGVR).Namespace(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(tmpl.Object, "spec")
	if err := unstructured.SetNestedField(spec, sa, "podTemplate", "spec", "serviceAccountName"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{templateGVR, map[string]any{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate", "spec": spec}},
		{warmPoolGVR, map[string]any{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
			"spec": map[string]any{"replicas": int64(1), "sandboxTemplateRef": map[string]any{"name": sa}}}},
		{claimGVR, map[string]any{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
			"spec": map[string]any{"warmPoolRef": map[string]any{"name": sa}}}},
	} {
		u := &unstructured.Unstructured{Object: o.obj}
		u.SetName(sa)
		if _, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		gvr := o.gvr
		t.Cleanup(func() {
			_ = dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), sa, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		})
	}
	pod, err := env.ClaimPod(ctx, sa)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestRecreatedServiceAccountTokenRefused: kube-apiserver caches a
// successful TokenReview for 10 s (TokenSuccessCacheTTL), so a token of a
// service account that was deleted and re-created under the same name
// still authenticates for that long. custody reads the ServiceAccount
// live and refuses a token issued for another UID.
func TestRecreatedServiceAccountTokenRefused(t *testing.T) {
	ctx := testCtx(t)
	pod := ownPool(t, ctx, "recreated-sa")
	tok := podToken(t, ctx, pod)
	keyOf(t, exchange(t, ctx, custody.URL, tok)) // the API server now caches the review

	sas := env.CP.Kube.CoreV1().ServiceAccounts(pod.Namespace)
	old, err := sas.Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sas.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recreated, err := sas.Create(ctx, saObject(old.Name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if recreated.UID == old.UID {
		t.Fatalf("re-created service account kept UID %s", old.UID)
	}
	start := time.Now()
	r := exchange(t, ctx, custody.URL, tok)
	// What the API server itself says of the old token now (its cache).
	tr, err := env.CP.Kube.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: tok, Audiences: []string{fixture.Audience}},
	}, metav1.CreateOptions{})
	if err == nil {
		t.Logf("%v after re-creating the account, TokenReview of the old token: authenticated=%v", time.Since(start), tr.Status.Authenticated)
	}
	wantRefused(t, r, http.StatusUnauthorized, "unauthenticated")

	// A token issued for the re-created account works.
	k := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, pod)))
	if k.Agent != "recreated-sa" || k.Session != pod.Name {
		t.Errorf("identity with the new account's token = %s/%s, want recreated-sa/%s", k.Agent, k.Session, pod.Name)
	}
}

// tokenReviews is the API server's count of TokenReviews created
// (apiserver_request_total for tokenreviews).
func tokenReviews(t *testing.T, ctx context.Context) int {
	t.Helper()
	raw, err := env.CP.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="tokenreviews"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// TestExchangeFloodFromOneAddress measures what an unauthenticated flood
// from one address costs the API server, with the default per-address
// limit and without one: tokens the API server cannot have signed cost
// no TokenReview at all; plausible ones (right alg, issuer and subject,
// bogus signature) cost one each only up to the limit.
func TestExchangeFloodFromOneAddress(t *testing.T) {
	ctx := testCtx(t)
	enc := base64.RawURLEncoding.EncodeToString
	plausible := enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." +
		enc([]byte(`{"iss":"`+controlplane.Issuer+`","sub":"system:serviceaccount:agents:agent","aud":["custody"]}`)) + "." +
		enc(make([]byte, 256))
	algNone := enc([]byte(`{"alg":"none"}`)) + "." +
		enc([]byte(`{"iss":"`+controlplane.Issuer+`","sub":"system:serviceaccount:agents:agent"}`)) + "." + enc(make([]byte, 256))

	flood := func(t *testing.T, url, token string, d time.Duration) (sent, limited, reviews int) {
		before := tokenReviews(t, ctx)
		var n, l atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(d)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					r, err := fixture.Exchange(ctx, url, token)
					if err != nil {
						t.Error(err)
						return
					}
					n.Add(1)
					switch r.Status {
					case http.StatusTooManyRequests:
						l.Add(1)
					case http.StatusUnauthorized:
					default:
						t.Errorf("flood exchange = %s, want 401 or 429", r)
						return
					}
				}
			}()
		}
		wg.Wait()
		return int(n.Load()), int(l.Load()), tokenReviews(t, ctx) - before
	}

	const d = 3 * time.Second
	limited, err := startCustody(ctx, "flood-default", "--kubernetes-issuers="+controlplane.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Stop()
	open, err := startCustody(ctx, "flood-open", "--exchange-address-rate=0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Stop()

	sent, _, reviews := flood(t, open.URL, algNone, d)
	t.Logf("alg none, no limit: %d attempts in %v, %d TokenReviews", sent, d, reviews)
	if reviews > 0 {
		t.Errorf("alg-none tokens cost %d TokenReviews, want 0", reviews)
	}
	sentOpen, _, reviewsOpen := flood(t, open.URL, plausible, d)
	t.Logf("plausible tokens, --exchange-address-rate=0: %d attempts in %v, %d TokenReviews", sentOpen, d, reviewsOpen)
	sent, lim, reviews := flood(t, limited.URL, plausible, d)
	t.Logf("plausible tokens, default limit: %d attempts in %v, %d rate-limited, %d TokenReviews", sent, d, lim, reviews)
	// Burst 250 plus 50/s, and a little slack for the seconds the flood
	// overruns d.
	if max := 250 + 50*int(d/time.Second+1); reviews > max {
		t.Errorf("default limit: a flood from one address cost %d TokenReviews in %v, want at most %d", reviews, d, max)
	}
}

// TestForeignSandboxClaimOwner: a Sandbox whose controller is a
// SandboxClaim kind of another API group is not agent-sandbox's claim:
// refused, and not as "still in warm pool" (waiting does not help).
func TestForeignSandboxClaimOwner(t *testing.T) {
	ctx := testCtx(t)
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "foreign-claimed", "namespace": fixture.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "claims.evil.example/v1", "kind": "SandboxClaim",
				"name": "foreign", "uid": "2b1c1fe1-0000-4000-8000-000000000001", "controller": true,
			}}},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"serviceAccountName": fixture.SandboxSA,
			"containers":         []any{map[string]any{"name": "c", "image": "x"}},
		}}},
	}}
	sandboxes := env.CP.Dynamic.Resource(sandboxGVR).Namespace(fixture.Namespace)
	if _, err := sandboxes.Create(ctx, sb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sandboxes.Delete(context.Background(), "foreign-claimed", metav1.DeleteOptions{}) })
	var pod *corev1.Pod
	if err := fixture.Poll(ctx, 30*time.Second, func() (bool, error) {
		var err error
		pod, err = env.SandboxPod(ctx, "foreign-claimed")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the controller made no pod for the Sandbox: %v", err)
	}
	r := exchange(t, ctx, custody.URL, podToken(t, ctx, pod))
	wantRefused(t, r, http.StatusUnauthorized, "not_claimed")
	if strings.Contains(string(r.Body), "warm pool") {
		t.Errorf("refusal = %s, want it not to say warm pool", r.Body)
	}
}
