package kubeauth

import (
	"context"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ready checks, with SelfSubjectAccessReviews, that custody may create
// TokenReviews and, in each configured tenant namespace, get pods,
// serviceaccounts, sandboxes and sandboxclaims. It returns a
// [*PermissionError] naming the first missing permission (wrapping
// ErrPermission) or ErrAPIServer.
func (e *Exchanger) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.callTO)
	defer cancel()
	checks := []authzv1.ResourceAttributes{permCreateTokenReviews}
	for _, ns := range e.namespaces {
		checks = append(checks, ownerLookup(ns)...)
	}
	for _, attrs := range checks {
		a := attrs
		r, err := e.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
		}, metav1.CreateOptions{})
		if err != nil {
			return apiError(permCreateAccessReview, err)
		}
		if !r.Status.Allowed {
			return &PermissionError{Attrs: a}
		}
	}
	return nil
}
