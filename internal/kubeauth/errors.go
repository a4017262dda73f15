package kubeauth

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// Sentinel errors. Everything a caller could have caused wraps
// ErrUnauthenticated (a uniform 401) except ErrWarmPool, which has its own
// 401 body because the caller can fix it by waiting for a claim, and
// ErrNotClaimed, whose 401 body says the owner chain is not agent-sandbox's
// (a misconfiguration waiting does not fix).
var (
	ErrUnauthenticated = errors.New("token refused")

	ErrMalformedToken = fmt.Errorf("%w: not a JWT-shaped token of acceptable size", ErrUnauthenticated)
	// ErrNotServiceAccountToken: JWT-shaped, but not what kube-apiserver
	// signs (header alg or typ, signature length, iss or sub); refused
	// before any TokenReview.
	ErrNotServiceAccountToken = fmt.Errorf("%w: cannot be a service-account token", ErrUnauthenticated)
	ErrNotAuthenticated       = fmt.Errorf("%w: TokenReview status.authenticated is false", ErrUnauthenticated)
	ErrAudience               = fmt.Errorf("%w: TokenReview status.audiences lacks custody's audience", ErrUnauthenticated)
	ErrNotServiceAccount      = fmt.Errorf("%w: user is not a service account", ErrUnauthenticated)
	ErrNotBound               = fmt.Errorf("%w: token is not bound to a pod", ErrUnauthenticated)
	// ErrNamespaceNotServed: the service account's namespace is not one
	// of Options.Namespaces.
	ErrNamespaceNotServed = fmt.Errorf("%w: namespace not served", ErrUnauthenticated)
	ErrPodGone            = fmt.Errorf("%w: pod is gone, replaced, being deleted or terminated", ErrUnauthenticated)
	// ErrServiceAccountGone: the token's service account is gone, being
	// deleted, or was re-created (another UID than TokenReview
	// status.user.uid).
	ErrServiceAccountGone = fmt.Errorf("%w: service account is gone or was re-created", ErrUnauthenticated)
	ErrNotSandbox         = fmt.Errorf("%w: pod is not controlled by a Sandbox", ErrUnauthenticated)
	ErrOwnerMismatch      = fmt.Errorf("%w: owner reference does not match the live owner", ErrUnauthenticated)
	// ErrNotTracked: the owner exists but does not point back: the Sandbox
	// tracks another pod, or the claim another Sandbox (a forged or stale
	// owner reference).
	ErrNotTracked = fmt.Errorf("%w: owner does not track this object", ErrUnauthenticated)
	// ErrExpired: the Sandbox's spec.shutdownTime or the claim's
	// spec.lifecycle.shutdownTime has passed (its pod may not be torn
	// down yet).
	ErrExpired = fmt.Errorf("%w: sandbox or claim has expired", ErrUnauthenticated)
	// ErrSuspended: the Sandbox's spec.operatingMode is Suspended (or
	// another mode than Running): its pod is to be deleted.
	ErrSuspended = fmt.Errorf("%w: sandbox is suspended", ErrUnauthenticated)

	// ErrNotClaimed: the Sandbox's controller is neither an agent-sandbox
	// SandboxClaim nor a SandboxWarmPool (for example a SandboxClaim kind
	// of another API group).
	ErrNotClaimed = fmt.Errorf("%w: sandbox is not controlled by an agent-sandbox SandboxClaim", ErrUnauthenticated)

	// ErrWarmPool: the Sandbox belongs to a SandboxWarmPool (agent-sandbox
	// extensions.agents.x-k8s.io) or to nothing, not yet to a SandboxClaim.
	ErrWarmPool = errors.New("sandbox is still in a warm pool")

	// ErrSaturated: too many exchanges at once; retry shortly.
	ErrSaturated = errors.New("too many concurrent exchanges")
	// ErrPermission: custody's own RBAC does not allow a call it needs;
	// wrapped by a [*PermissionError] naming the call.
	ErrPermission = errors.New("custody lacks a Kubernetes permission")
	// ErrAPIServer: the API server failed or timed out.
	ErrAPIServer = errors.New("kubernetes API server unavailable")
)

// Refusal maps an Authenticate error to what the caller sees. Messages
// are fixed text; no API server error text reaches the caller.
func Refusal(err error) apikey.Refusal {
	switch {
	case errors.Is(err, ErrWarmPool):
		return apikey.Refusal{Status: http.StatusUnauthorized, Code: "warm_pool", Message: "still in warm pool"}
	case errors.Is(err, ErrNotClaimed):
		return apikey.Refusal{Status: http.StatusUnauthorized, Code: "not_claimed", Message: "sandbox is not owned by an agent-sandbox SandboxClaim"}
	case errors.Is(err, ErrUnauthenticated):
		return apikey.Refusal{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "token refused"}
	case errors.Is(err, ErrSaturated):
		return apikey.Refusal{Status: http.StatusServiceUnavailable, Code: "saturated", Message: "too many concurrent exchanges; retry", RetryAfter: time.Second}
	case errors.Is(err, ErrPermission):
		perm, ok := missingPermission(err)
		if !ok {
			perm = "create tokenreviews; get pods, serviceaccounts, sandboxes, sandboxclaims in this namespace"
		}
		return apikey.Refusal{Status: http.StatusInternalServerError, Code: "rbac_missing",
			Message: "custody's service account lacks a permission it needs: " + perm + "; see deploy/base/rbac.yaml"}
	default:
		return apikey.Refusal{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "kubernetes API unavailable; retry", RetryAfter: time.Second}
	}
}
