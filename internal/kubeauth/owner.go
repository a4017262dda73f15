package kubeauth

import (
	"context"

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

// ownerChain follows the controller owner references Pod -> Sandbox ->
// SandboxClaim, GETting each owner live and comparing its UID with the
// reference. A Sandbox whose controller is not a SandboxClaim (a
// SandboxWarmPool, or none) gives ErrWarmPool.
func (e *Exchanger) ownerChain(ctx context.Context, pod *corev1.Pod) (chain, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || refGroupKind(ref) != sandboxGK {
		return chain{}, ErrNotSandbox
	}
	sb, err := e.getOwned(ctx, SandboxGVR, pod.Namespace, ref, "get sandbox")
	if err != nil {
		return chain{}, err
	}
	ref = metav1.GetControllerOf(sb)
	if ref == nil || refGroupKind(ref) != claimGK {
		return chain{}, ErrWarmPool
	}
	claim, err := e.getOwned(ctx, SandboxClaimGVR, pod.Namespace, ref, "get sandboxclaim")
	if err != nil {
		return chain{}, err
	}
	return chain{sandbox: sb, claim: claim}, nil
}

// getOwned GETs the owner that ref names and checks its UID and that it
// is not being deleted.
func (e *Exchanger) getOwned(ctx context.Context, gvr schema.GroupVersionResource, ns string, ref *metav1.OwnerReference, op string) (*unstructured.Unstructured, error) {
	obj, err := e.dyn.Resource(gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ErrOwnerMismatch
	}
	if err != nil {
		return nil, apiError(op, err)
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
