package kubeauth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// gate sees every live GET of an exchange with its context (client-go
// fakes' reactors do not) and can hold or fail it. Resources are
// "pods", "serviceaccounts", "sandboxes" and "sandboxclaims"; each is
// read at most once per exchange.
type gate struct {
	started, done map[string]chan struct{}
	// before runs when a GET starts; a non-nil error fails the GET
	// without asking the fake.
	before func(ctx context.Context, g *gate, resource string) error

	mu        sync.Mutex
	cancelled map[string]bool
}

func newGate(before func(context.Context, *gate, string) error) *gate {
	g := &gate{started: map[string]chan struct{}{}, done: map[string]chan struct{}{}, before: before, cancelled: map[string]bool{}}
	for _, r := range []string{"pods", "serviceaccounts", "sandboxes", "sandboxclaims"} {
		g.started[r], g.done[r] = make(chan struct{}), make(chan struct{})
	}
	return g
}

// get runs one GET of resource through the gate.
func get[T any](ctx context.Context, g *gate, resource string, inner func() (T, error)) (T, error) {
	close(g.started[resource])
	defer close(g.done[resource])
	if g.before != nil {
		if err := g.before(ctx, g, resource); err != nil {
			if ctx.Err() != nil {
				g.mu.Lock()
				g.cancelled[resource] = true
				g.mu.Unlock()
			}
			var zero T
			return zero, err
		}
	}
	return inner()
}

// await waits for ch; it fails with ctx's error when ctx ends first and
// with errNotReached after 5 s (the awaited read never happened).
func await(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
		return errNotReached
	}
}

var errNotReached = errors.New("test: awaited read did not happen within 5 s")

func (g *gate) wasCancelled(resource string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancelled[resource]
}

func (g *gate) wasStarted(resource string) bool {
	select {
	case <-g.started[resource]:
		return true
	default:
		return false
	}
}

type gatedKube struct {
	kubernetes.Interface
	g *gate
}

func (k gatedKube) CoreV1() corev1client.CoreV1Interface { return gatedCore{k.Interface.CoreV1(), k.g} }

type gatedCore struct {
	corev1client.CoreV1Interface
	g *gate
}

func (c gatedCore) Pods(ns string) corev1client.PodInterface {
	return gatedPods{c.CoreV1Interface.Pods(ns), c.g}
}

func (c gatedCore) ServiceAccounts(ns string) corev1client.ServiceAccountInterface {
	return gatedSAs{c.CoreV1Interface.ServiceAccounts(ns), c.g}
}

type gatedPods struct {
	corev1client.PodInterface
	g *gate
}

func (p gatedPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	return get(ctx, p.g, "pods", func() (*corev1.Pod, error) { return p.PodInterface.Get(ctx, name, opts) })
}

type gatedSAs struct {
	corev1client.ServiceAccountInterface
	g *gate
}

func (s gatedSAs) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ServiceAccount, error) {
	return get(ctx, s.g, "serviceaccounts", func() (*corev1.ServiceAccount, error) { return s.ServiceAccountInterface.Get(ctx, name, opts) })
}

type gatedDyn struct {
	dynamic.Interface
	g *gate
}

func (d gatedDyn) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return gatedResource{d.Interface.Resource(gvr), gvr.Resource, d.g}
}

type gatedResource struct {
	dynamic.NamespaceableResourceInterface
	resource string
	g        *gate
}

func (r gatedResource) Namespace(ns string) dynamic.ResourceInterface {
	return gatedNamespaced{r.NamespaceableResourceInterface.Namespace(ns), r.resource, r.g}
}

type gatedNamespaced struct {
	dynamic.ResourceInterface
	resource string
	g        *gate
}

func (r gatedNamespaced) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	return get(ctx, r.g, r.resource, func() (*unstructured.Unstructured, error) { return r.ResourceInterface.Get(ctx, name, opts, sub...) })
}

// gated is w's exchanger with every live GET going through g.
func (w *world) gated(t *testing.T, g *gate) *Exchanger {
	ex := w.exchanger(t)
	ex.kube = gatedKube{ex.kube, g}
	ex.dyn = gatedDyn{ex.dyn, g}
	return ex
}

// TestAttestReadsConcurrently: the service-account read runs alongside
// the whole chain pod -> Sandbox -> claim. Its GET is held until the
// claim's GET has started, which a sequential exchange never reaches.
func TestAttestReadsConcurrently(t *testing.T) {
	g := newGate(func(ctx context.Context, g *gate, res string) error {
		if res == "serviceaccounts" {
			return await(ctx, g.started["sandboxclaims"])
		}
		return nil
	})
	id, err := goodWorld().gated(t, g).Authenticate(context.Background(), testToken)
	if err != nil || id.Agent != "run-1" {
		t.Fatalf("Authenticate() = %+v, %v; want run-1 with the service-account read alongside the chain", id, err)
	}
}

// TestAttestErrorOrder: when several reads fail, the error is the first
// failure in the sequential order pod, service account, Sandbox, claim,
// whichever read finishes first; a read is cancelled only by the failure
// of a read before it.
func TestAttestErrorOrder(t *testing.T) {
	errReset := errors.New("connection reset by peer")
	tests := []struct {
		name   string
		mutate func(*world)
		before func(ctx context.Context, g *gate, res string) error
		want   error
		// wantPerm, when set, is the permission a *PermissionError must name.
		wantPerm string
		// cancelled reads must have seen their context cancelled;
		// notStarted reads must never have started.
		cancelled, notStarted []string
	}{
		{
			name:   "pod and service account gone, service account answers first",
			mutate: func(w *world) { w.pod, w.sa = nil, nil },
			before: func(ctx context.Context, g *gate, res string) error {
				if res == "pods" {
					return await(ctx, g.done["serviceaccounts"])
				}
				return nil
			},
			want: ErrPodGone, notStarted: []string{"sandboxes", "sandboxclaims"},
		},
		{
			name:   "pod gone cancels the service-account read",
			mutate: func(w *world) { w.pod = nil },
			before: func(ctx context.Context, g *gate, res string) error {
				if res == "serviceaccounts" {
					return await(ctx, make(chan struct{}))
				}
				return nil
			},
			want: ErrPodGone, cancelled: []string{"serviceaccounts"}, notStarted: []string{"sandboxes", "sandboxclaims"},
		},
		{
			name:   "pod read fails after service account forbidden",
			mutate: func(w *world) { w.forbidden = map[string]bool{"serviceaccounts": true} },
			before: func(ctx context.Context, g *gate, res string) error {
				if res == "pods" {
					if err := await(ctx, g.done["serviceaccounts"]); err != nil {
						return err
					}
					return errReset
				}
				return nil
			},
			want: ErrAPIServer, notStarted: []string{"sandboxes", "sandboxclaims"},
		},
		{
			name:   "service account gone and sandbox gone, sandbox answers first",
			mutate: func(w *world) { w.sa, w.sandbox = nil, nil },
			before: func(ctx context.Context, g *gate, res string) error {
				if res == "serviceaccounts" {
					return await(ctx, g.done["sandboxes"])
				}
				return nil
			},
			want: ErrServiceAccountGone,
		},
		{
			name: "service account forbidden while the sandbox is in a warm pool",
			mutate: func(w *world) {
				w.forbidden = map[string]bool{"serviceaccounts": true}
				w.sandbox.SetOwnerReferences([]metav1.OwnerReference{owner("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool", "pool", "wp")})
			},
			before: func(ctx context.Context, g *gate, res string) error {
				if res == "serviceaccounts" {
					return await(ctx, g.done["sandboxes"])
				}
				return nil
			},
			want: ErrPermission, wantPerm: "get serviceaccounts in namespace agents",
		},
		{
			name:   "service account gone cancels the claim read",
			mutate: func(w *world) { w.sa = nil },
			before: func(ctx context.Context, g *gate, res string) error {
				switch res {
				case "serviceaccounts":
					return await(ctx, g.started["sandboxclaims"])
				case "sandboxclaims":
					return await(ctx, make(chan struct{}))
				}
				return nil
			},
			want: ErrServiceAccountGone, cancelled: []string{"sandboxclaims"},
		},
		{
			name:   "sandbox gone is reported only once the service account is read",
			mutate: func(w *world) { w.sandbox = nil },
			before: func(ctx context.Context, g *gate, res string) error {
				if res == "serviceaccounts" {
					return await(ctx, g.done["sandboxes"])
				}
				return nil
			},
			want: ErrOwnerMismatch, notStarted: []string{"sandboxclaims"},
		},
		{
			name:   "claim read fails while the service account read is slow",
			mutate: func(*world) {},
			before: func(ctx context.Context, g *gate, res string) error {
				switch res {
				case "serviceaccounts":
					return await(ctx, g.done["sandboxclaims"])
				case "sandboxclaims":
					return errReset
				}
				return nil
			},
			want: ErrAPIServer,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := goodWorld()
			tc.mutate(w)
			g := newGate(tc.before)
			_, err := w.gated(t, g).Authenticate(context.Background(), testToken)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Authenticate() = %v, want %v", err, tc.want)
			}
			if errors.Is(err, errNotReached) {
				t.Fatalf("Authenticate() = %v: a read the test awaited never happened", err)
			}
			if tc.want != ErrPermission && errors.Is(err, ErrPermission) {
				t.Errorf("Authenticate() = %v, want no *PermissionError (a later read's)", err)
			}
			if tc.wantPerm != "" {
				if perm, _ := missingPermission(err); perm != tc.wantPerm {
					t.Errorf("missingPermission(%v) = %q, want %q", err, perm, tc.wantPerm)
				}
			}
			for _, r := range tc.cancelled {
				if !g.wasCancelled(r) {
					t.Errorf("the %s read was not cancelled", r)
				}
			}
			for _, r := range tc.notStarted {
				if g.wasStarted(r) {
					t.Errorf("the %s read started, want none after an earlier read failed", r)
				}
			}
		})
	}
}
