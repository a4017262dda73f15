package kubeauth

import (
	"context"
	"fmt"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ready checks, with SelfSubjectAccessReviews, that custody may create
// TokenReviews and, in each configured tenant namespace, get pods,
// serviceaccounts, sandboxes and sandboxclaims. It returns an error naming the first
// missing permission (wrapping ErrPermission) or ErrAPIServer.
func (e *Exchanger) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.callTO)
	defer cancel()
	checks := []authzv1.ResourceAttributes{{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}}
	for _, ns := range e.namespaces {
		checks = append(checks,
			authzv1.ResourceAttributes{Namespace: ns, Resource: "pods", Verb: "get"},
			authzv1.ResourceAttributes{Namespace: ns, Resource: "serviceaccounts", Verb: "get"},
			authzv1.ResourceAttributes{Namespace: ns, Group: SandboxGVR.Group, Resource: SandboxGVR.Resource, Verb: "get"},
			authzv1.ResourceAttributes{Namespace: ns, Group: SandboxClaimGVR.Group, Resource: SandboxClaimGVR.Resource, Verb: "get"},
		)
	}
	for _, attrs := range checks {
		a := attrs
		r, err := e.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
		}, metav1.CreateOptions{})
		if err != nil {
			return apiError("create selfsubjectaccessreview", err)
		}
		if !r.Status.Allowed {
			where := "cluster-wide"
			if a.Namespace != "" {
				where = "in namespace " + a.Namespace
			}
			return fmt.Errorf("%w: %s %s.%s %s", ErrPermission, a.Verb, a.Resource, a.Group, where)
		}
	}
	return nil
}
