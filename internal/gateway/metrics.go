package gateway

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentcustody/custody/internal/metering"
)

// Outcomes of a data-plane request: the fixed label set of
// custody_gateway_requests_total.
const (
	outcomeProxied         = "proxied"
	outcomeUnknownProvider = "unknown_provider"
	outcomeMissingToken    = "missing_token"
	outcomeInvalidToken    = "invalid_token"
	outcomeForbidden       = "forbidden"
	outcomeRevoked         = "revoked"
	outcomeStale           = "revocation_stale"
	outcomeNoKey           = "no_key"
	outcomeUpstreamError   = "upstream_error"
	outcomeCancelled       = "cancelled"
	outcomeNotFound        = "not_found"
	outcomePathNotAllowed  = "path_not_allowed"
	outcomeBudgetExceeded  = "budget_exceeded"
	outcomeBudgetUnchecked = "budget_unavailable"
	outcomeUnmeterable     = "unmeterable"
	outcomeBusy            = "busy"
	outcomeProviderTool    = "provider_tool"
	outcomeBodyUnchecked   = "body_unchecked"
)

// metrics are the gateway's collectors. They always exist; they are
// registered only when Options.Metrics is set.
type metrics struct {
	requests    *prometheus.CounterVec
	inflight    prometheus.Gauge
	minted      prometheus.Counter
	revoked     prometheus.Counter
	revocations prometheus.Gauge
	// viewAge and heldBytes read the gateway at each scrape (watch).
	viewAge, heldBytes prometheus.GaugeFunc

	// known is the bounded set of provider label values.
	known map[string]bool
}

func newMetrics(providers []string) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "custody_gateway_requests_total",
			Help: "Data-plane requests by provider (configured name or unknown) and outcome.",
		}, []string{"provider", "outcome"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "custody_gateway_inflight_requests",
			Help: "Data-plane requests being proxied now.",
		}),
		minted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "custody_gateway_tokens_minted_total",
			Help: "Gateway tokens minted.",
		}),
		revoked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "custody_gateway_tokens_revoked_total",
			Help: "Gateway token revocations made on this replica.",
		}),
		revocations: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "custody_gateway_revocations",
			Help: "Revoked tokens in this replica's in-memory set: until an hour after their exp, as long as the store keeps them.",
		}),
		known: make(map[string]bool, len(providers)),
	}
	for _, p := range providers {
		m.known[p] = true
	}
	return m
}

// watch makes the gauges read from g at each scrape:
// custody_gateway_revocation_view_age_seconds, the age of g's view of
// revocations (since its last successful poll of the store started; at
// Options.MaxStaleness every request is refused), and
// custody_gateway_held_body_bytes, the bytes of request bodies g holds
// now (at maxHeldBodies requests are refused busy).
func (m *metrics) watch(g *Gateway) {
	m.viewAge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "custody_gateway_revocation_view_age_seconds",
		Help: "Seconds since this replica's last successful poll of the store's revocations started; at --gateway-revocation-max-staleness every request is refused.",
	}, func() float64 { return g.sinceFresh().Seconds() })
	m.heldBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "custody_gateway_held_body_bytes",
		Help: "Bytes of request bodies held in memory now (read whole for the model, provider-run tools or the meter); at 128 MiB requests are refused busy.",
	}, func() float64 { return float64(g.held.total()) })
}

// register registers every collector with reg, or none of them.
func (m *metrics) register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{m.requests, m.inflight, m.minted, m.revoked, m.revocations, m.viewAge, m.heldBytes}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	return nil
}

// request counts one data-plane request.
func (m *metrics) request(provider, outcome string) {
	if !m.known[provider] {
		provider = "unknown"
	}
	m.requests.WithLabelValues(provider, outcome).Inc()
}

// outcomeFor is the outcome label of a refusal.
func outcomeFor(err error) string {
	switch {
	case errors.Is(err, ErrUnknownProvider):
		return outcomeUnknownProvider
	case errors.Is(err, ErrMissingToken):
		return outcomeMissingToken
	case errors.Is(err, ErrInvalidToken):
		return outcomeInvalidToken
	case errors.Is(err, ErrForbidden):
		return outcomeForbidden
	case errors.Is(err, ErrRevoked):
		return outcomeRevoked
	case errors.Is(err, ErrRevocationStale):
		return outcomeStale
	case errors.Is(err, ErrNoProviderKey):
		return outcomeNoKey
	case errors.Is(err, ErrPathNotAllowed):
		return outcomePathNotAllowed
	case errors.Is(err, metering.ErrBudgetExceeded):
		return outcomeBudgetExceeded
	case errors.Is(err, metering.ErrUnavailable):
		return outcomeBudgetUnchecked
	case errors.Is(err, ErrUnmeterable):
		return outcomeUnmeterable
	case errors.Is(err, ErrBusy):
		return outcomeBusy
	case errors.Is(err, ErrProviderTool):
		return outcomeProviderTool
	case errors.Is(err, ErrBodyUnchecked):
		return outcomeBodyUnchecked
	}
	return outcomeUpstreamError
}
