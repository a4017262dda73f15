package kubeauth

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Clients builds [Options.Kube] and [Options.Dynamic] from rc over one
// shared *http.Client: one connection pool, so the reads of an exchange
// (and of concurrent exchanges) reuse the same keep-alive connection;
// over TLS the API server speaks HTTP/2 and the concurrent reads are
// multiplexed on it instead of dialling (and handshaking) again.
//
// rc's QPS and Burst apply as client-go applies them: one token bucket
// for Kube (TokenReview, pods, service accounts) and one for Dynamic
// (Sandboxes, SandboxClaims); QPS <= 0 with no RateLimiter means none.
// rc is not modified.
func Clients(rc *rest.Config) (kubernetes.Interface, dynamic.Interface, error) {
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes HTTP client: %w", err)
	}
	kc, err := kubernetes.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := dynamic.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return kc, dc, nil
}
