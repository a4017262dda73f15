package cli

import (
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/kubeauth"
	"github.com/agentcustody/custody/internal/ratelimit"
)

// restConfig loads Kubernetes credentials from path (or, when empty, the
// in-cluster service account) with the configured rate limits.
func restConfig(path string, qps float64, burst int) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	if path != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes credentials (--kubeconfig, $KUBECONFIG or in-cluster): %w", err)
	}
	rc.QPS, rc.Burst = float32(qps), burst
	rc.UserAgent = "custody"
	return rc, nil
}

func newExchanger(cfg ServeConfig, log *slog.Logger) (*kubeauth.Exchanger, error) {
	rc, err := restConfig(cfg.Kubeconfig, cfg.KubernetesQPS, cfg.KubernetesBurst)
	if err != nil {
		return nil, usageError{err}
	}
	kc, dc, err := kubeauth.Clients(rc)
	if err != nil {
		return nil, err
	}
	return kubeauth.New(kubeauth.Options{
		Kube: kc, Dynamic: dc, Audience: cfg.KubernetesAudience,
		MaxConcurrent: cfg.ExchangeConcurrency, QueueTimeout: cfg.ExchangeQueueTimeout,
		Namespaces: cfg.KubernetesNamespaces, Issuers: cfg.KubernetesIssuers, Log: log,
	})
}

// exchangeLimits are the exchange rate limits cfg sets: per pod
// incarnation (ExchangePodRate per minute, burst 20) and per client
// address (ExchangeAddressRate per second, burst five seconds' worth).
// now is the clock (nil: time.Now).
func exchangeLimits(cfg ServeConfig, now func() time.Time) apikey.ExchangeLimits {
	return apikey.ExchangeLimits{
		ByIdentity: ratelimit.New(cfg.ExchangePodRate/60, 20, 0, now),
		ByAddress:  ratelimit.New(cfg.ExchangeAddressRate, int(max(5*cfg.ExchangeAddressRate, 1)), 0, now),
	}
}
