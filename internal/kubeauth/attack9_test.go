package kubeauth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentcustody/custody/internal/apikey"
)

// TestAttack9TerminatedPodRefused: a sandbox pod whose phase is Failed
// (evicted, or its containers exited under restartPolicy Never) or
// Succeeded will never run again, but its object stays — agent-sandbox
// keeps it and only marks the Sandbox not ready (PodFailed,
// PodSucceeded) — and the API server keeps authenticating its bound
// token (it checks only that the pod exists with the token's UID). A
// token taken from it must not mint keys for the claim for the rest of
// its lifetime, and a lease it held is free.
func TestAttack9TerminatedPodRefused(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodFailed, corev1.PodSucceeded} {
		t.Run(string(phase), func(t *testing.T) {
			w := goodWorld()
			w.pod.Status.Phase = phase
			if phase == corev1.PodFailed {
				w.pod.Status.Reason = "Evicted"
			}
			ex := w.exchanger(t)
			id, err := ex.Authenticate(context.Background(), testToken)
			if !errors.Is(err, ErrPodGone) {
				t.Fatalf("Authenticate(token of a %s pod) = %+v, %v; want ErrPodGone", phase, id, err)
			}
			live := goodWorld()
			liveID, err := live.exchanger(t).Authenticate(context.Background(), testToken)
			if err != nil {
				t.Fatal(err)
			}
			if alive, err := ex.PodAlive(context.Background(), liveID); alive || err != nil {
				t.Errorf("PodAlive(%s pod) = %v, %v; want false", phase, alive, err)
			}
		})
	}
	// Running, Pending and an unreported phase still pass.
	for _, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, ""} {
		w := goodWorld()
		w.pod.Status.Phase = phase
		if _, err := w.exchanger(t).Authenticate(context.Background(), testToken); err != nil {
			t.Errorf("Authenticate(token of a %q pod) = %v, want success", phase, err)
		}
	}
}

// TestAttack9HeldNonControllerSandboxRef: a pod whose only reference to
// the Sandbox is not a controller reference (controller false or unset)
// is not the Sandbox's pod.
func TestAttack9HeldNonControllerSandboxRef(t *testing.T) {
	for _, c := range []*bool{ptrBool(false), nil} {
		w := goodWorld()
		w.pod.OwnerReferences[0].Controller = c
		if id, err := w.exchanger(t).Authenticate(context.Background(), testToken); !errors.Is(err, ErrNotSandbox) {
			t.Errorf("Authenticate(controller=%v) = %+v, %v; want ErrNotSandbox", c, id, err)
		}
	}
}

// TestAttack9HeldHungReadFailsClosed: an API server that never answers
// one of the concurrent reads (the claim GET here, or the service-account
// GET while the chain succeeds) gives no key: the exchange ends with
// ErrAPIServer (503) once CallTimeout passes, and no read outlives it.
func TestAttack9HeldHungReadFailsClosed(t *testing.T) {
	for _, hung := range []string{"sandboxclaims", "serviceaccounts", "pods"} {
		t.Run(hung, func(t *testing.T) {
			g := newGate(func(ctx context.Context, g *gate, res string) error {
				if res == hung {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			})
			ex := goodWorld().gated(t, g)
			ex.callTO = 200 * time.Millisecond
			start := time.Now()
			id, err := ex.Authenticate(context.Background(), testToken)
			if !errors.Is(err, ErrAPIServer) || errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("Authenticate() with a hung %s read = %+v, %v; want ErrAPIServer", hung, id, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Authenticate() took %v, want about CallTimeout", d)
			}
			if r := Refusal(err); r.Status != http.StatusServiceUnavailable {
				t.Errorf("Refusal(%v) = %+v, want 503", err, r)
			}
			if !g.wasCancelled(hung) {
				t.Errorf("the hung %s read was not cancelled", hung)
			}
		})
	}
}

// TestAttack9HeldRefusalsNeverCarryTheToken: neither the error (which the
// handler logs) nor the refusal body of any refusal contains the token
// or its signature.
func TestAttack9HeldRefusalsNeverCarryTheToken(t *testing.T) {
	sig := testToken[strings.LastIndexByte(testToken, '.')+1:]
	mutations := []func(*world){
		func(w *world) { w.review.Authenticated = false },
		func(w *world) { w.review.Audiences = nil },
		func(w *world) { w.pod = nil },
		func(w *world) { w.sa = nil },
		func(w *world) { w.claim = nil },
		func(w *world) { w.reviewErr = errors.New("connection refused") },
		func(w *world) { w.forbidden = map[string]bool{"pods": true} },
	}
	for i, m := range mutations {
		w := goodWorld()
		m(w)
		_, err := w.exchanger(t).Authenticate(context.Background(), testToken+"\n")
		if err == nil {
			t.Fatalf("mutation %d: no refusal", i)
		}
		r := Refusal(err)
		for _, s := range []string{err.Error(), r.Message, r.Code} {
			if strings.Contains(s, sig) {
				t.Errorf("mutation %d: %q carries the token", i, s)
			}
		}
	}
}

// TestAttack9ExpiredClaimRefused: a SandboxClaim (spec.lifecycle) or
// Sandbox (spec) whose shutdownTime has passed has expired: agent-sandbox
// tears its pod down, but only when its controller gets to it (it may be
// down, restarting or behind). Until then the pod is live and its token
// authenticates; custody must not mint keys for an expired sandbox.
func TestAttack9ExpiredClaimRefused(t *testing.T) {
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	set := func(path ...string) func(w *world, v string) {
		return func(w *world, v string) {
			o := w.claim
			if path[0] == "sandbox" {
				o = w.sandbox
			}
			_ = unstructured.SetNestedField(o.Object, v, path[1:]...)
		}
	}
	for name, f := range map[string]func(*world, string){
		"claim":   set("claim", "spec", "lifecycle", "shutdownTime"),
		"sandbox": set("sandbox", "spec", "shutdownTime"),
	} {
		t.Run(name, func(t *testing.T) {
			w := goodWorld()
			f(w, past)
			if id, err := w.exchanger(t).Authenticate(context.Background(), testToken); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("Authenticate(%s shutdownTime passed) = %+v, %v; want a 401 refusal", name, id, err)
			}
			w = goodWorld()
			f(w, "not a time")
			if id, err := w.exchanger(t).Authenticate(context.Background(), testToken); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("Authenticate(%s shutdownTime unreadable) = %+v, %v; want a 401 refusal", name, id, err)
			}
			w = goodWorld()
			f(w, future)
			if _, err := w.exchanger(t).Authenticate(context.Background(), testToken); err != nil {
				t.Errorf("Authenticate(%s shutdownTime ahead) = %v, want success", name, err)
			}
		})
	}
}

// TestAttack9SuspendedSandboxRefused: a Sandbox whose spec.operatingMode
// is Suspended is to have no pod; agent-sandbox's controller deletes it
// when it gets to it. Until then the pod is live and its token
// authenticates; custody must not mint keys for a suspended sandbox (nor
// for a mode it does not know).
func TestAttack9SuspendedSandboxRefused(t *testing.T) {
	for _, mode := range []string{"Suspended", "Hibernated"} {
		w := goodWorld()
		_ = unstructured.SetNestedField(w.sandbox.Object, mode, "spec", "operatingMode")
		if id, err := w.exchanger(t).Authenticate(context.Background(), testToken); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("Authenticate(operatingMode %s) = %+v, %v; want a 401 refusal", mode, id, err)
		}
	}
	w := goodWorld()
	_ = unstructured.SetNestedField(w.sandbox.Object, "Running", "spec", "operatingMode")
	if _, err := w.exchanger(t).Authenticate(context.Background(), testToken); err != nil {
		t.Errorf("Authenticate(operatingMode Running) = %v, want success", err)
	}
}

// attack9Store is an in-memory apikey.Store that counts inserts.
type attack9Store struct {
	mu   sync.Mutex
	recs map[[32]byte]apikey.Record
}

func (s *attack9Store) InsertKey(_ context.Context, r apikey.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[r.Hash] = r
	return nil
}

func (s *attack9Store) LookupKey(_ context.Context, h [32]byte) (apikey.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[h]
	if !ok {
		return r, apikey.ErrNotFound
	}
	return r, nil
}

func (s *attack9Store) RevokeKey(context.Context, [32]byte, time.Time) error { return nil }
func (s *attack9Store) RevokeAgentKeys(context.Context, string, string, time.Time) ([][32]byte, error) {
	return nil, nil
}
func (s *attack9Store) DeleteExpiredKeys(context.Context, time.Time) (int64, error) { return 0, nil }

// TestAttack9HeldExchangeEndpoint: through the HTTP exchange, every
// refusal (terminated pod, expired claim, suspended Sandbox, foreign
// audience, API server down) mints no key, answers fixed
// text without the token, and only the intact chain gets a key.
func TestAttack9HeldExchangeEndpoint(t *testing.T) {
	past := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	cases := []struct {
		name   string
		mutate func(*world)
		status int
	}{
		{"intact", func(*world) {}, 200},
		{"evicted pod", func(w *world) { w.pod.Status.Phase = corev1.PodFailed }, 401},
		{"expired claim", func(w *world) {
			_ = unstructured.SetNestedField(w.claim.Object, past, "spec", "lifecycle", "shutdownTime")
		}, 401},
		{"suspended sandbox", func(w *world) {
			_ = unstructured.SetNestedField(w.sandbox.Object, "Suspended", "spec", "operatingMode")
		}, 401},
		{"token for another audience", func(w *world) { w.review.Audiences = []string{"vault"} }, 401},
		{"api server down", func(w *world) { w.reviewErr = errors.New("connection refused " + testToken) }, 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := goodWorld()
			tc.mutate(w)
			st := &attack9Store{recs: map[[32]byte]apikey.Record{}}
			keys, err := apikey.New(apikey.Options{Store: st, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			h := keys.ExchangeHandler(w.exchanger(t), Refusal, slog.New(slog.DiscardHandler), apikey.ExchangeLimits{})
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/v1/auth/kubernetes", strings.NewReader(`{"token":"`+testToken+`"}`))
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("exchange = %d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			if n := len(st.recs); (tc.status == 200) != (n == 1) || n > 1 {
				t.Errorf("exchange stored %d keys", n)
			}
			if tc.status != 200 && (strings.Contains(rec.Body.String(), apikey.Prefix) || strings.Contains(rec.Body.String(), testToken[len(testToken)-40:])) {
				t.Errorf("refusal body %s carries a key or the token", rec.Body)
			}
		})
	}
}
