// Package metering counts what a gateway's requests use and holds them to
// budgets: usage parsed from each provider response (see
// internal/tooluse), kept per gateway token, run, tenant, provider, model
// and UTC day, and limits on requests, input tokens and output tokens per
// token, per run and per tenant per period, counted atomically across
// replicas in the [Store].
//
// The contract is in [Meter] (reserve before forwarding, observe while
// the response streams, settle once) and [Store].
package metering
