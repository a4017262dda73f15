package kubeauth

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type chain struct {
	sandbox *unstructured.Unstructured
	claim   *unstructured.Unstructured
}

// SandboxPodNameAnnotation is where a Sandbox records the name of the pod
// it adopted from a warm pool; without it the pod has the Sandbox's name.
const SandboxPodNameAnnotation = "agents.x-k8s.io/pod-name"

// ownerChain follows the controller owner references Pod -> Sandbox ->
// SandboxClaim, GETting each owner live and comparing its UID with the
// reference. A Sandbox controlled by a SandboxWarmPool (or by nothing,
// as while a claim adopts it) gives ErrWarmPool; one controlled by
// anything else, a SandboxClaim kind of another API group included, gives
// ErrNotClaimed.
//
// An owner reference is written by whoever creates the object, so anyone
// allowed to create pods (or Sandboxes) in the namespace can point one at
// somebody else's Sandbox (or SandboxClaim). Each hop is therefore checked
// in both directions: the Sandbox must track this pod (by name), and the
// claim must track this Sandbox (status.sandbox.name).
//
// A Sandbox or claim whose shutdownTime has passed gives ErrExpired; a
// Sandbox whose spec.operatingMode is not Running (Suspended: its pod is
// to be deleted) gives ErrSuspended. agent-sandbox's controller acts on
// both only when it gets to it.
func (e *Exchanger) ownerChain(ctx context.Context, pod *corev1.Pod) (chain, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || refGroupKind(ref) != sandboxGK {
		return chain{}, ErrNotSandbox
	}
	sb, err := e.getOwned(ctx, SandboxGVR, pod.Namespace, ref)
	if err != nil {
		return chain{}, err
	}
	tracked := sb.GetAnnotations()[SandboxPodNameAnnotation]
	if tracked == "" {
		tracked = sb.GetName()
	}
	if tracked != pod.Name {
		return chain{}, ErrNotTracked
	}
	if expired(sb, "spec", "shutdownTime") {
		return chain{}, ErrExpired
	}
	if mode, _, err := unstructured.NestedString(sb.Object, "spec", "operatingMode"); err != nil || (mode != "" && mode != "Running") {
		return chain{}, ErrSuspended
	}
	ref = metav1.GetControllerOf(sb)
	switch {
	case ref == nil || refGroupKind(ref) == warmPoolGK:
		return chain{}, ErrWarmPool
	case refGroupKind(ref) != claimGK:
		return chain{}, ErrNotClaimed
	}
	claim, err := e.getOwned(ctx, SandboxClaimGVR, pod.Namespace, ref)
	if err != nil {
		return chain{}, err
	}
	if name, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name"); name != sb.GetName() {
		return chain{}, ErrNotTracked
	}
	if expired(claim, "spec", "lifecycle", "shutdownTime") {
		return chain{}, ErrExpired
	}
	return chain{sandbox: sb, claim: claim}, nil
}

// expired reports whether the shutdownTime at path in obj has passed: the
// object has expired, though agent-sandbox's controller may not have torn
// its pod down yet (it may be down or behind). A shutdownTime that is not
// an RFC 3339 string counts as passed (the CRDs make it one).
func expired(obj *unstructured.Unstructured, path ...string) bool {
	v, found, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if err != nil {
		return true
	}
	if !found || v == nil {
		return false
	}
	s, ok := v.(string)
	if !ok {
		return true
	}
	at, err := time.Parse(time.RFC3339, s)
	return err != nil || !time.Now().Before(at)
}

// getOwned GETs the owner that ref names and checks its UID and that it
// is not being deleted.
func (e *Exchanger) getOwned(ctx context.Context, gvr schema.GroupVersionResource, ns string, ref *metav1.OwnerReference) (*unstructured.Unstructured, error) {
	obj, err := e.dyn.Resource(gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ErrOwnerMismatch
	}
	if err != nil {
		return nil, apiError(permGet(ns, gvr), err)
	}
	if obj.GetUID() != ref.UID || obj.GetDeletionTimestamp() != nil {
		return nil, ErrOwnerMismatch
	}
	return obj, nil
}

// refGroupKind is the group and kind of an owner reference, ignoring its
// version: references keep the apiVersion they were written with.
func refGroupKind(ref *metav1.OwnerReference) schema.GroupKind {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupKind{}
	}
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
}
