// Package kubeauth attests a sandbox from its projected service-account
// token: TokenReview with custody's audience, the pod the token is bound
// to, and the owner chain Pod -> Sandbox -> SandboxClaim, checking the UID
// at every hop. The result is an apikey.Identity:
//
//	tenant  = the service account's namespace (TokenReview status.user.username)
//	agent   = the SandboxClaim's name (from the owner chain, never a pod name)
//	session = the pod's name (TokenReview status.user.extra
//	          "authentication.kubernetes.io/pod-name")
//
// Nothing is cached: every exchange asks the API server again, so a pod
// that was deleted, adopted or replaced is seen at once. The API server
// keeps authenticating a deleted pod's bound token for a few seconds (its
// own cache) and a gracefully deleted pod's token until deletionTimestamp
// plus 60 s, so the pod is read live and refused when it is gone, has
// another UID, has a deletionTimestamp, or has terminated (phase Failed
// or Succeeded: such a pod's token still authenticates while its object
// stays). The API server also caches a
// successful TokenReview for 10 s (kube-apiserver TokenSuccessCacheTTL),
// so a token of a service account that was deleted and re-created under
// the same name still authenticates for that long: the ServiceAccount is
// read live too and its UID must be the one the token was issued for
// (TokenReview status.user.uid).
//
// RBAC needed: create tokenreviews (cluster), and get pods,
// serviceaccounts, sandboxes, sandboxclaims in each tenant namespace (a
// Role per namespace).
package kubeauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/agentcustody/custody/internal/apikey"
)

// Extra keys of a bound service-account token in TokenReview
// status.user.extra.
const (
	ExtraPodName = "authentication.kubernetes.io/pod-name"
	ExtraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// The agent-sandbox resources of the owner chain. Owner references are
// matched by group and kind (they keep the apiVersion they were written
// with, v1alpha1 on older objects); the objects are read through v1beta1.
var (
	SandboxGVR      = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	SandboxClaimGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	sandboxGK       = schema.GroupKind{Group: "agents.x-k8s.io", Kind: "Sandbox"}
	claimGK         = schema.GroupKind{Group: "extensions.agents.x-k8s.io", Kind: "SandboxClaim"}
	warmPoolGK      = schema.GroupKind{Group: "extensions.agents.x-k8s.io", Kind: "SandboxWarmPool"}
)

// Options configure an [Exchanger]. The zero value of each field means its
// default.
type Options struct {
	// Kube is used for TokenReview, pods and service accounts. Required.
	// [Clients] builds it and Dynamic over one connection pool. Each
	// exchange makes three calls through Kube and two through Dynamic,
	// so a client-side rate limit of q QPS on each sustains about q/3
	// exchanges per second; client-go's default 5 QPS would queue a
	// burst of exchanges.
	Kube kubernetes.Interface
	// Dynamic reads Sandboxes and SandboxClaims. Required.
	Dynamic dynamic.Interface
	// Audience is the audience the projected token must carry, sent in
	// TokenReview spec.audiences and required in status.audiences.
	// Default "custody".
	Audience string
	// MaxTokenBytes refuses longer tokens before any TokenReview.
	// Default 16384.
	MaxTokenBytes int
	// Issuers, when set, are the service-account token issuers the API
	// server accepts (its --service-account-issuer values): a token whose
	// "iss" is none of them is refused before any TokenReview. Empty
	// accepts any issuer (the API server checks it). Either way a token
	// that cannot be a service-account token (alg, typ, sub; see
	// checkShape) costs no TokenReview.
	Issuers []string
	// MaxConcurrent bounds exchanges talking to the API server at once.
	// Default 64.
	MaxConcurrent int
	// QueueTimeout is how long an exchange waits for a free slot before
	// it is refused with [ErrSaturated] (503 with Retry-After). Default 2 s.
	QueueTimeout time.Duration
	// CallTimeout bounds all API calls of one exchange. Default 10 s.
	CallTimeout time.Duration
	// Namespaces lists the tenant namespaces custody serves: a token from
	// a service account in any other namespace is refused
	// ([ErrNamespaceNotServed]) before any other API call, and the
	// readiness check verifies the owner-lookup Role in each. Empty serves
	// every namespace where custody's RBAC allows the owner lookup (a
	// namespace without the Role then gives ErrPermission) and checks only
	// TokenReview access.
	Namespaces []string
	// Log receives refusal reasons at Debug (never the token).
	// Default slog.Default().
	Log *slog.Logger
}

// Exchanger turns projected service-account tokens into identities. It is
// safe for concurrent use.
type Exchanger struct {
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	audience   string
	maxToken   int
	issuers    []string
	slots      chan struct{}
	queueWait  time.Duration
	callTO     time.Duration
	namespaces []string
	log        *slog.Logger
}

var _ apikey.Authenticator = (*Exchanger)(nil)

// New validates opts and returns an Exchanger.
func New(opts Options) (*Exchanger, error) {
	if opts.Kube == nil || opts.Dynamic == nil {
		return nil, errors.New("kubeauth: Kube and Dynamic clients are required")
	}
	if opts.MaxTokenBytes < 0 || opts.MaxConcurrent < 0 || opts.QueueTimeout < 0 || opts.CallTimeout < 0 {
		return nil, errors.New("kubeauth: negative limit")
	}
	if opts.Audience == "" {
		opts.Audience = "custody"
	}
	if opts.MaxTokenBytes == 0 {
		opts.MaxTokenBytes = 16384
	}
	if opts.MaxConcurrent == 0 {
		opts.MaxConcurrent = 64
	}
	if opts.QueueTimeout == 0 {
		opts.QueueTimeout = 2 * time.Second
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Exchanger{
		kube: opts.Kube, dyn: opts.Dynamic, audience: opts.Audience,
		maxToken: opts.MaxTokenBytes, slots: make(chan struct{}, opts.MaxConcurrent),
		queueWait: opts.QueueTimeout, callTO: opts.CallTimeout,
		namespaces: append([]string(nil), opts.Namespaces...),
		issuers:    append([]string(nil), opts.Issuers...),
		log:        opts.Log.With("service", "kubeauth"),
	}, nil
}

// Authenticate attests token and returns the identity it speaks for.
// Errors wrap one of the sentinels in errors.go.
func (e *Exchanger) Authenticate(ctx context.Context, token string) (apikey.Identity, error) {
	token = trimToken(token)
	if err := checkShape(token, e.maxToken, e.issuers); err != nil {
		return apikey.Identity{}, err
	}
	if err := e.acquire(ctx); err != nil {
		return apikey.Identity{}, err
	}
	defer func() { <-e.slots }()
	ctx, cancel := context.WithTimeout(ctx, e.callTO)
	defer cancel()

	user, err := e.review(ctx, token, e.audience)
	if err != nil {
		return apikey.Identity{}, err
	}
	if len(e.namespaces) > 0 && !contains(e.namespaces, user.namespace) {
		return apikey.Identity{}, ErrNamespaceNotServed
	}
	chain, err := e.attest(ctx, user)
	if err != nil {
		return apikey.Identity{}, err
	}
	return apikey.Identity{
		Tenant:         user.namespace,
		Agent:          chain.claim.GetName(),
		Session:        user.podName,
		Method:         "kubernetes",
		ServiceAccount: user.username,
		PodUID:         user.podUID,
		SandboxName:    chain.sandbox.GetName(),
		SandboxUID:     string(chain.sandbox.GetUID()),
		ClaimUID:       string(chain.claim.GetUID()),
	}, nil
}

// acquire takes a concurrency slot, waiting at most the queue timeout.
func (e *Exchanger) acquire(ctx context.Context) error {
	select {
	case e.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(e.queueWait)
	defer t.Stop()
	select {
	case e.slots <- struct{}{}:
		return nil
	case <-t.C:
		return ErrSaturated
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrSaturated, ctx.Err())
	}
}

type reviewedUser struct {
	username, namespace, serviceAccount string
	// uid is the service account's UID the token was issued for
	// (TokenReview status.user.uid).
	uid             string
	podName, podUID string
}

// ServiceAccount attests token as a projected service-account token for
// audience (with TokenReview, not cached) and returns the service
// account's namespace and name. Unlike Authenticate it does not need the
// token to be bound to a pod. It is used for operators' callers on the
// admin listener.
func (e *Exchanger) ServiceAccount(ctx context.Context, token, audience string) (ns, name string, err error) {
	token = trimToken(token)
	if err := checkShape(token, e.maxToken, e.issuers); err != nil {
		return "", "", err
	}
	if err := e.acquire(ctx); err != nil {
		return "", "", err
	}
	defer func() { <-e.slots }()
	ctx, cancel := context.WithTimeout(ctx, e.callTO)
	defer cancel()
	user, err := e.review(ctx, token, audience)
	if err != nil && !errors.Is(err, ErrNotBound) {
		return "", "", err
	}
	return user.namespace, user.serviceAccount, nil
}

// review runs the TokenReview for audience and checks audience, service
// account and pod binding. With ErrNotBound, the service account fields
// are still set.
func (e *Exchanger) review(ctx context.Context, token, audience string) (reviewedUser, error) {
	tr, err := e.kube.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return reviewedUser{}, apiError(permCreateTokenReviews, err)
	}
	st := tr.Status
	if !st.Authenticated {
		return reviewedUser{}, ErrNotAuthenticated
	}
	if !contains(st.Audiences, audience) {
		return reviewedUser{}, ErrAudience
	}
	ns, sa, ok := parseServiceAccount(st.User.Username)
	if !ok {
		return reviewedUser{}, ErrNotServiceAccount
	}
	u := reviewedUser{username: st.User.Username, namespace: ns, serviceAccount: sa, uid: st.User.UID}
	u.podName, u.podUID = single(st.User.Extra[ExtraPodName]), single(st.User.Extra[ExtraPodUID])
	if u.podName == "" || u.podUID == "" {
		return u, ErrNotBound
	}
	return u, nil
}

// livePod GETs the pod and checks it is the one the token is bound to, is
// not being deleted and has not terminated: a Failed (evicted, for
// example) or Succeeded pod never runs again, but its object stays (the
// Sandbox keeps it) and the API server keeps authenticating its token.
func (e *Exchanger) livePod(ctx context.Context, ns, name, uid string) (*corev1.Pod, error) {
	pod, err := e.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ErrPodGone
	}
	if err != nil {
		return nil, apiError(permGet(ns, podsGVR), err)
	}
	if string(pod.UID) != uid {
		return nil, ErrPodGone
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return nil, ErrPodGone
	}
	return pod, nil
}

// liveServiceAccount GETs the token's service account and checks it is
// the one the token was issued for: same UID (TokenReview
// status.user.uid, which the API server sets from the token's
// kubernetes.io.serviceaccount.uid claim) and not being deleted. An empty
// UID cannot be checked and is refused.
func (e *Exchanger) liveServiceAccount(ctx context.Context, u reviewedUser) error {
	if u.uid == "" {
		return ErrServiceAccountGone
	}
	sa, err := e.kube.CoreV1().ServiceAccounts(u.namespace).Get(ctx, u.serviceAccount, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ErrServiceAccountGone
	}
	if err != nil {
		return apiError(permGet(u.namespace, serviceAccountsGVR), err)
	}
	if string(sa.UID) != u.uid || sa.DeletionTimestamp != nil {
		return ErrServiceAccountGone
	}
	return nil
}

// PodAlive reports whether the pod that id names (Tenant/Session with
// PodUID) still exists, is not being deleted and has not terminated. Identities not attested
// by Kubernetes are reported alive (their leases must expire).
func (e *Exchanger) PodAlive(ctx context.Context, id apikey.Identity) (bool, error) {
	if id.Method != "kubernetes" || id.PodUID == "" {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.callTO)
	defer cancel()
	_, err := e.livePod(ctx, id.Tenant, id.Session, id.PodUID)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrPodGone):
		return false, nil
	default:
		return false, err
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func single(v authnv1.ExtraValue) string {
	if len(v) != 1 {
		return ""
	}
	return v[0]
}
