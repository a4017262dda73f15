package metering

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the meter's Prometheus collectors, with bounded labels:
//
//	custody_gateway_usage_total{provider,counter}          requests, input_tokens, output_tokens
//	custody_gateway_budget_refusals_total{scope}           token, run, tenant, unavailable
//	custody_metering_flush_failures_total
//	custody_metering_pending                               settlements and usage rows not yet written
//
// provider is one of the names given to [NewMetrics], or "other".
type Metrics struct {
	usage    *prometheus.CounterVec
	refusals *prometheus.CounterVec
	failures prometheus.Counter
	pend     prometheus.Gauge
	// counters are the usage counters of each provider label value
	// (requests, input_tokens, output_tokens), made once.
	counters map[string][3]prometheus.Counter
}

// NewMetrics makes the collectors for providers and registers them with
// reg.
func NewMetrics(reg prometheus.Registerer, providers []string) (*Metrics, error) {
	m := &Metrics{
		usage: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "custody_gateway_usage_total",
			Help: "What gateway requests used, as metered: requests, input_tokens and output_tokens, by provider.",
		}, []string{"provider", "counter"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "custody_gateway_budget_refusals_total",
			Help: "Requests refused and streams cut for a budget, by the budget's scope (token, run, tenant), or unavailable when it could not be checked.",
		}, []string{"scope"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "custody_metering_flush_failures_total",
			Help: "Writes of usage and settlements to the store that failed (retried).",
		}),
		pend: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "custody_metering_pending",
			Help: "Settlements and usage rows waiting to be written to the store.",
		}),
		counters: map[string][3]prometheus.Counter{},
	}
	for _, p := range append(providers, "other") {
		m.counters[p] = [3]prometheus.Counter{
			m.usage.WithLabelValues(p, "requests"),
			m.usage.WithLabelValues(p, "input_tokens"),
			m.usage.WithLabelValues(p, "output_tokens"),
		}
	}
	for _, c := range []prometheus.Collector{m.usage, m.refusals, m.failures, m.pend} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) used(provider string, u Usage) {
	if m == nil {
		return
	}
	c, ok := m.counters[provider]
	if !ok {
		c = m.counters["other"]
	}
	c[0].Add(float64(u.Requests))
	c[1].Add(float64(u.InputTokens))
	c[2].Add(float64(u.OutputTokens))
}

func (m *Metrics) refused(scope string) {
	if m != nil {
		m.refusals.WithLabelValues(scope).Inc()
	}
}

func (m *Metrics) flushFailed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) setPending(n int) {
	if m != nil {
		m.pend.Set(float64(n))
	}
}
