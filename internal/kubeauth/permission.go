package kubeauth

import (
	"errors"
	"fmt"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The core resources an exchange reads (the owner chain's custom
// resources are SandboxGVR and SandboxClaimGVR).
var (
	podsGVR            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
)

// The permissions custody needs, as SelfSubjectAccessReview
// ResourceAttributes: cluster-wide (ClusterRole custody-tokenreview) and
// per tenant namespace (Role custody-owner-lookup, deploy/base/rbac.yaml).
var (
	permCreateTokenReviews = authzv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}
	permCreateAccessReview = authzv1.ResourceAttributes{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews", Verb: "create"}
)

// permGet is the permission to get resource gvr in namespace ns.
func permGet(ns string, gvr schema.GroupVersionResource) authzv1.ResourceAttributes {
	return authzv1.ResourceAttributes{Namespace: ns, Group: gvr.Group, Resource: gvr.Resource, Verb: "get"}
}

// ownerLookup lists what an exchange for a token of namespace ns reads,
// in the order it reads it.
func ownerLookup(ns string) []authzv1.ResourceAttributes {
	return []authzv1.ResourceAttributes{
		permGet(ns, podsGVR), permGet(ns, serviceAccountsGVR),
		permGet(ns, SandboxGVR), permGet(ns, SandboxClaimGVR),
	}
}

// PermissionError is [ErrPermission] naming the one permission custody's
// service account lacks. errors.Is(err, ErrPermission) holds for it.
type PermissionError struct {
	// Attrs is the missing permission (verb, group, resource and
	// namespace; an empty namespace is cluster-wide).
	Attrs authzv1.ResourceAttributes
	// Err is the API server's refusal, for the log only; nil when
	// readiness found the permission missing by SelfSubjectAccessReview.
	Err error
}

// Permission names the missing permission, e.g. "get serviceaccounts in
// namespace agents" or "create tokenreviews.authentication.k8s.io
// cluster-wide". It holds no API server text.
func (e *PermissionError) Permission() string {
	res := e.Attrs.Resource
	if e.Attrs.Group != "" {
		res += "." + e.Attrs.Group
	}
	where := "cluster-wide"
	if e.Attrs.Namespace != "" {
		where = "in namespace " + e.Attrs.Namespace
	}
	return e.Attrs.Verb + " " + res + " " + where
}

func (e *PermissionError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%v: %s", ErrPermission, e.Permission())
	}
	return fmt.Sprintf("%v: %s: %v", ErrPermission, e.Permission(), e.Err)
}

// Unwrap gives ErrPermission and the API server's error.
func (e *PermissionError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrPermission}
	}
	return []error{ErrPermission, e.Err}
}

// apiError classifies an error from the API server for the call that
// attrs permits: a refusal of custody's own credentials is a
// [*PermissionError], anything else ErrAPIServer. The raw error is kept
// for the log only.
func apiError(attrs authzv1.ResourceAttributes, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &PermissionError{Attrs: attrs, Err: err}
	}
	perm := PermissionError{Attrs: attrs}
	return fmt.Errorf("%w: %s: %w", ErrAPIServer, perm.Permission(), err)
}

// missingPermission is the permission err names, if it is a
// [*PermissionError].
func missingPermission(err error) (string, bool) {
	var pe *PermissionError
	if !errors.As(err, &pe) {
		return "", false
	}
	return pe.Permission(), true
}
