package kubeauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A token shaped like a projected service-account token (RS256, k8s
// claims, a 2048-bit signature's length); the fake TokenReview reactor
// decides what it means.
var testToken = jws(`{"alg":"RS256","kid":"k1"}`, `{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:agents:agent"}`, 256)

type world struct {
	review    authnv1.TokenReviewStatus
	reviewErr error
	pod       *corev1.Pod
	sa        *corev1.ServiceAccount
	sandbox   *unstructured.Unstructured
	claim     *unstructured.Unstructured
	reviews   int
	auds      []string
	// forbidden makes GETs of these resources fail with 403 Forbidden.
	forbidden map[string]bool
}

func owner(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptrBool(true)}
}

func ptrBool(b bool) *bool { return &b }

func obj(apiVersion, kind, name string, uid types.UID, refs ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("agents")
	u.SetName(name)
	u.SetUID(uid)
	u.SetOwnerReferences(refs)
	return u
}

// goodWorld is a claimed sandbox: Pod -> Sandbox -> SandboxClaim run-1.
func goodWorld() *world {
	return &world{
		review: authnv1.TokenReviewStatus{
			Authenticated: true,
			Audiences:     []string{"custody"},
			User: authnv1.UserInfo{
				Username: "system:serviceaccount:agents:agent",
				UID:      "sa-uid",
				Extra: map[string]authnv1.ExtraValue{
					ExtraPodName: {"pool-x7k2q"},
					ExtraPodUID:  {"pod-uid"},
				},
			},
		},
		pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "agents", Name: "pool-x7k2q", UID: "pod-uid",
			OwnerReferences: []metav1.OwnerReference{owner("agents.x-k8s.io/v1beta1", "Sandbox", "pool-x7k2q", "sb-uid")},
		}},
		sa: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agent", UID: "sa-uid"}},
		sandbox: obj("agents.x-k8s.io/v1beta1", "Sandbox", "pool-x7k2q", "sb-uid",
			owner("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", "run-1", "claim-uid")),
		claim: withStatusSandbox(obj("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", "run-1", "claim-uid"), "pool-x7k2q"),
	}
}

func withStatusSandbox(u *unstructured.Unstructured, name string) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, name, "status", "sandbox", "name")
	return u
}

func (w *world) exchanger(t *testing.T) *Exchanger {
	t.Helper()
	kube := fake.NewClientset()
	if w.pod != nil {
		if err := kube.Tracker().Add(w.pod); err != nil {
			t.Fatal(err)
		}
	}
	if w.sa != nil {
		if err := kube.Tracker().Add(w.sa); err != nil {
			t.Fatal(err)
		}
	}
	forbid := func(a k8stesting.Action) (bool, runtime.Object, error) {
		gr := a.GetResource().GroupResource()
		if !w.forbidden[gr.Resource] {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(gr, "x", errors.New("RBAC: system:serviceaccount:custody-system:custody cannot get"))
	}
	kube.PrependReactor("get", "*", forbid)
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		w.reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		w.auds = tr.Spec.Audiences
		if w.reviewErr != nil {
			return true, nil, w.reviewErr
		}
		return true, &authnv1.TokenReview{Status: w.review}, nil
	})
	scheme := runtime.NewScheme()
	gvrs := map[schema.GroupVersionResource]string{SandboxGVR: "SandboxList", SandboxClaimGVR: "SandboxClaimList"}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(scheme, gvrs)
	dyn.PrependReactor("get", "*", forbid)
	for gvr, o := range map[schema.GroupVersionResource]*unstructured.Unstructured{SandboxGVR: w.sandbox, SandboxClaimGVR: w.claim} {
		if o == nil {
			continue
		}
		if _, err := dyn.Resource(gvr).Namespace("agents").Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ex, err := New(Options{Kube: kube, Dynamic: dyn, QueueTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func TestAuthenticate(t *testing.T) {
	id, err := goodWorld().exchanger(t).Authenticate(context.Background(), testToken)
	if err != nil {
		t.Fatalf("Authenticate() = %v, want success", err)
	}
	if id.Tenant != "agents" || id.Agent != "run-1" || id.Session != "pool-x7k2q" || id.PodUID != "pod-uid" || id.ClaimUID != "claim-uid" {
		t.Errorf("Authenticate() = %+v, want agents/run-1/pool-x7k2q", id)
	}
}

func TestAuthenticateRefusals(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*world)
		want   error
		status int
	}{
		{"not authenticated", func(w *world) { w.review.Authenticated = false }, ErrNotAuthenticated, 401},
		{"authenticated but audiences lack ours", func(w *world) { w.review.Audiences = []string{"https://kubernetes.default.svc"} }, ErrAudience, 401},
		{"no audiences at all", func(w *world) { w.review.Audiences = nil }, ErrAudience, 401},
		{"not a service account", func(w *world) { w.review.User.Username = "alice" }, ErrNotServiceAccount, 401},
		{"malformed service account", func(w *world) { w.review.User.Username = "system:serviceaccount:agents" }, ErrNotServiceAccount, 401},
		{"not bound to a pod", func(w *world) { delete(w.review.User.Extra, ExtraPodName) }, ErrNotBound, 401},
		{"no pod uid", func(w *world) { delete(w.review.User.Extra, ExtraPodUID) }, ErrNotBound, 401},
		{"two pod names", func(w *world) { w.review.User.Extra[ExtraPodName] = authnv1.ExtraValue{"a", "b"} }, ErrNotBound, 401},
		{"pod gone", func(w *world) { w.pod = nil }, ErrPodGone, 401},
		{"pod replaced", func(w *world) { w.pod.UID = "other" }, ErrPodGone, 401},
		{"pod terminating", func(w *world) { now := metav1.Now(); w.pod.DeletionTimestamp = &now }, ErrPodGone, 401},
		{"service account deleted", func(w *world) { w.sa = nil }, ErrServiceAccountGone, 401},
		{"service account re-created (new uid)", func(w *world) { w.sa.UID = "sa-uid-2" }, ErrServiceAccountGone, 401},
		{"service account being deleted", func(w *world) { now := metav1.Now(); w.sa.DeletionTimestamp = &now }, ErrServiceAccountGone, 401},
		{"review without user uid", func(w *world) { w.review.User.UID = "" }, ErrServiceAccountGone, 401},
		{"pod without controller", func(w *world) { w.pod.OwnerReferences = nil }, ErrNotSandbox, 401},
		{"pod owned by a ReplicaSet", func(w *world) {
			w.pod.OwnerReferences = []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "rs", "rs-uid")}
		}, ErrNotSandbox, 401},
		{"Sandbox kind in another group", func(w *world) {
			w.pod.OwnerReferences = []metav1.OwnerReference{owner("evil.example/v1", "Sandbox", "pool-x7k2q", "sb-uid")}
		}, ErrNotSandbox, 401},
		{"sandbox gone", func(w *world) { w.sandbox = nil }, ErrOwnerMismatch, 401},
		{"sandbox uid differs", func(w *world) { w.sandbox.SetUID("new-sb") }, ErrOwnerMismatch, 401},
		{"warm pool", func(w *world) {
			w.sandbox.SetOwnerReferences([]metav1.OwnerReference{owner("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool", "pool", "wp")})
		}, ErrWarmPool, 401},
		{"sandbox without owner", func(w *world) { w.sandbox.SetOwnerReferences(nil) }, ErrWarmPool, 401},
		{"SandboxClaim kind in another group", func(w *world) {
			w.sandbox.SetOwnerReferences([]metav1.OwnerReference{owner("claims.evil.example/v1", "SandboxClaim", "run-1", "claim-uid")})
		}, ErrNotClaimed, 401},
		{"SandboxWarmPool kind in another group", func(w *world) {
			w.sandbox.SetOwnerReferences([]metav1.OwnerReference{owner("evil.example/v1", "SandboxWarmPool", "pool", "wp")})
		}, ErrNotClaimed, 401},
		{"sandbox controlled by a Deployment", func(w *world) {
			w.sandbox.SetOwnerReferences([]metav1.OwnerReference{owner("apps/v1", "Deployment", "d", "d-uid")})
		}, ErrNotClaimed, 401},
		{"claim gone", func(w *world) { w.claim = nil }, ErrOwnerMismatch, 401},
		{"claim re-created (new uid)", func(w *world) { w.claim.SetUID("claim-uid-2") }, ErrOwnerMismatch, 401},
		{"claim being deleted", func(w *world) {
			w.claim.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
		}, ErrOwnerMismatch, 401},
		{"forged pod pointing at another pod's Sandbox", func(w *world) {
			w.pod.Name = "evil-pod"
			w.review.User.Extra[ExtraPodName] = authnv1.ExtraValue{"evil-pod"}
		}, ErrNotTracked, 401},
		{"Sandbox annotation tracks another pod", func(w *world) {
			w.sandbox.SetName("sb-1")
			w.pod.OwnerReferences[0].Name = "sb-1"
			withStatusSandbox(w.claim, "sb-1")
			w.sandbox.SetAnnotations(map[string]string{SandboxPodNameAnnotation: "other-pod"})
		}, ErrNotTracked, 401},
		{"forged Sandbox pointing at another claim", func(w *world) { withStatusSandbox(w.claim, "the-real-sandbox") }, ErrNotTracked, 401},
		{"claim status not yet set", func(w *world) { unstructured.RemoveNestedField(w.claim.Object, "status") }, ErrNotTracked, 401},
		{"tokenreview forbidden", func(w *world) {
			w.reviewErr = apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("RBAC"))
		}, ErrPermission, 500},
		{"api server down", func(w *world) { w.reviewErr = errors.New("connection refused") }, ErrAPIServer, 503},
		{"get serviceaccounts forbidden", func(w *world) { w.forbidden = map[string]bool{"serviceaccounts": true} }, ErrPermission, 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := goodWorld()
			tc.mutate(w)
			_, err := w.exchanger(t).Authenticate(context.Background(), testToken)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Authenticate() = %v, want %v", err, tc.want)
			}
			ref := Refusal(err)
			if ref.Status != tc.status {
				t.Errorf("Refusal(%v).Status = %d, want %d", err, ref.Status, tc.status)
			}
			if wantCode := refusalCode(tc.want); wantCode != "" && ref.Code != wantCode {
				t.Errorf("Refusal(%v).Code = %q, want %q", err, ref.Code, wantCode)
			}
			if strings.Contains(ref.Message, "RBAC") || strings.Contains(ref.Message, "connection refused") {
				t.Errorf("Refusal message %q leaks the API error", ref.Message)
			}
		})
	}
}

// refusalCode is the error code a sentinel with a body of its own must
// get; "" for the rest.
func refusalCode(sentinel error) string {
	switch sentinel {
	case ErrWarmPool:
		return "warm_pool"
	case ErrNotClaimed:
		return "not_claimed"
	case ErrPermission:
		return "rbac_missing"
	}
	return ""
}

func TestRBACMissingNamesThePermission(t *testing.T) {
	all := []string{"tokenreviews", "pods", "serviceaccounts", "sandboxes", "sandboxclaims"}
	tests := []struct{ resource, want string }{
		{"tokenreviews", "create tokenreviews.authentication.k8s.io cluster-wide"},
		{"pods", "get pods in namespace agents"},
		{"serviceaccounts", "get serviceaccounts in namespace agents"},
		{"sandboxes", "get sandboxes.agents.x-k8s.io in namespace agents"},
		{"sandboxclaims", "get sandboxclaims.extensions.agents.x-k8s.io in namespace agents"},
	}
	for _, tc := range tests {
		t.Run(tc.resource, func(t *testing.T) {
			w := goodWorld()
			if tc.resource == "tokenreviews" {
				w.reviewErr = apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("RBAC"))
			}
			w.forbidden = map[string]bool{tc.resource: true}
			_, err := w.exchanger(t).Authenticate(context.Background(), testToken)
			var pe *PermissionError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPermission) {
				t.Fatalf("Authenticate() = %v, want a *PermissionError", err)
			}
			ref := Refusal(err)
			if ref.Code != "rbac_missing" || !strings.Contains(ref.Message, ": "+tc.want+";") {
				t.Errorf("Refusal(%v) = %+v, want rbac_missing naming %q", err, ref, tc.want)
			}
			for _, other := range all {
				if other != tc.resource && strings.Contains(ref.Message, other) {
					t.Errorf("Refusal message %q names %s, which is not missing", ref.Message, other)
				}
			}
		})
	}
}

func TestAdoptedWarmPoolPodTrackedByAnnotation(t *testing.T) {
	w := goodWorld()
	w.sandbox.SetName("sb-1")
	w.pod.OwnerReferences[0].Name = "sb-1"
	withStatusSandbox(w.claim, "sb-1")
	w.sandbox.SetAnnotations(map[string]string{SandboxPodNameAnnotation: "pool-x7k2q"})
	id, err := w.exchanger(t).Authenticate(context.Background(), testToken)
	if err != nil || id.SandboxName != "sb-1" || id.Session != "pool-x7k2q" {
		t.Fatalf("Authenticate() = %+v, %v; want sandbox sb-1, session pool-x7k2q", id, err)
	}
}

func TestNamespaceNotServed(t *testing.T) {
	w := goodWorld()
	ex := w.exchanger(t)
	ex.namespaces = []string{"other"}
	if _, err := ex.Authenticate(context.Background(), testToken); !errors.Is(err, ErrNamespaceNotServed) {
		t.Fatalf("Authenticate() from an unserved namespace = %v, want ErrNamespaceNotServed", err)
	}
	ex.namespaces = []string{"other", "agents"}
	if _, err := ex.Authenticate(context.Background(), testToken); err != nil {
		t.Fatalf("Authenticate() from a served namespace = %v", err)
	}
}

func TestAudienceSent(t *testing.T) {
	w := goodWorld()
	if _, err := w.exchanger(t).Authenticate(context.Background(), testToken); err != nil {
		t.Fatal(err)
	}
	if len(w.auds) != 1 || w.auds[0] != "custody" {
		t.Errorf("TokenReview spec.audiences = %v, want [custody]", w.auds)
	}
}

func TestV1alpha1OwnerReferences(t *testing.T) {
	w := goodWorld()
	w.pod.OwnerReferences[0].APIVersion = "agents.x-k8s.io/v1alpha1"
	w.sandbox.SetOwnerReferences([]metav1.OwnerReference{owner("extensions.agents.x-k8s.io/v1alpha1", "SandboxClaim", "run-1", "claim-uid")})
	id, err := w.exchanger(t).Authenticate(context.Background(), testToken)
	if err != nil || id.Agent != "run-1" {
		t.Fatalf("Authenticate() with v1alpha1 references = %+v, %v; want run-1", id, err)
	}
}

func TestMalformedTokensNeverReviewed(t *testing.T) {
	for _, tok := range []string{"", "abc", "a.b", "a.b.c.d", "a..c", "a.b.c", "e30.e30.sig", "!!!.e30.sig",
		"eyJhbGciOiJSUzI1NiJ9.e30.c2ln" + strings.Repeat("A", 20000)} {
		w := goodWorld()
		_, err := w.exchanger(t).Authenticate(context.Background(), tok)
		if !errors.Is(err, ErrMalformedToken) {
			t.Errorf("Authenticate(%.20q) = %v, want ErrMalformedToken", tok, err)
		}
		if w.reviews != 0 {
			t.Errorf("Authenticate(%.20q) made %d TokenReviews, want 0", tok, w.reviews)
		}
	}
}

func TestSaturated(t *testing.T) {
	ex := goodWorld().exchanger(t)
	for i := 0; i < cap(ex.slots); i++ {
		ex.slots <- struct{}{}
	}
	_, err := ex.Authenticate(context.Background(), testToken)
	if !errors.Is(err, ErrSaturated) {
		t.Fatalf("Authenticate() when saturated = %v, want ErrSaturated", err)
	}
	if r := Refusal(err); r.Status != http.StatusServiceUnavailable || r.RetryAfter <= 0 {
		t.Errorf("Refusal(ErrSaturated) = %+v, want 503 with Retry-After", r)
	}
}

func TestPodAlive(t *testing.T) {
	w := goodWorld()
	ex := w.exchanger(t)
	id, err := ex.Authenticate(context.Background(), testToken)
	if err != nil {
		t.Fatal(err)
	}
	if alive, err := ex.PodAlive(context.Background(), id); !alive || err != nil {
		t.Errorf("PodAlive(live pod) = %v, %v; want true", alive, err)
	}
	id.PodUID = "gone"
	if alive, err := ex.PodAlive(context.Background(), id); alive || err != nil {
		t.Errorf("PodAlive(replaced pod) = %v, %v; want false", alive, err)
	}
}

func TestReady(t *testing.T) {
	w := goodWorld()
	ex := w.exchanger(t)
	kube := ex.kube.(*fake.Clientset)
	allowed := map[string]bool{"tokenreviews": true, "pods": true, "serviceaccounts": true, "sandboxes": true, "sandboxclaims": true}
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview)
		r.Status.Allowed = allowed[r.Spec.ResourceAttributes.Resource]
		return true, r, nil
	})
	ex.namespaces = []string{"agents"}
	for _, missing := range []string{"serviceaccounts", "sandboxclaims"} {
		allowed[missing] = false
		err := ex.Ready(context.Background())
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "get "+missing) {
			t.Errorf("Ready() without get %s = %v, want ErrPermission naming it", missing, err)
		}
		allowed[missing] = true
	}
	if err := ex.Ready(context.Background()); err != nil {
		t.Fatalf("Ready() = %v, want nil", err)
	}
}

func FuzzCheckShape(f *testing.F) {
	for _, s := range []string{testToken, "", "a.b.c", "e30.e30.e30", "eyJhbGciOiJub25lIn0..", "....", "\x00.\x00.\x00",
		jws(`{"alg":"none"}`, `{"iss":"i","sub":"system:serviceaccount:a:b"}`, 256),
		jws(`{"alg":"ES256","typ":"JWT"}`, `{"iss":"i","sub":"system:serviceaccount:a:b"}`, 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkShape(s, 16384, nil) != nil {
			return
		}
		parts := strings.Split(s, ".")
		if len(parts) != 3 {
			t.Fatalf("checkShape(%q) accepted a token without three segments", s)
		}
		hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
		var h struct{ Alg string }
		if json.Unmarshal(hdr, &h) != nil {
			t.Fatalf("checkShape(%q) accepted header %s", s, hdr)
		}
		if _, ok := saSignatureLen[h.Alg]; !ok {
			t.Fatalf("checkShape(%q) accepted header %s", s, hdr)
		}
	})
}
