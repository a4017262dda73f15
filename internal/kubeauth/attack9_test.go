package kubeauth

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
