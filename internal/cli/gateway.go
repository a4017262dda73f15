package cli

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// gatewayStore is what the gateway and its meter keep rows in.
type gatewayStore interface {
	gateway.Store
	metering.Store
}

// newGateway makes the gateway and the meter it holds requests to
// budgets with; closing the gateway first, then the meter (which writes
// what is pending), is the caller's.
func newGateway(ctx context.Context, cfg ServeConfig, db gatewayStore, reg prometheus.Registerer, rec gateway.Recorder, log *slog.Logger) (*gateway.Gateway, *metering.Meter, error) {
	path := cfg.GatewaySigningKey
	if path == "" {
		path = filepath.Join(cfg.DataDir, gateway.SigningKeyFile)
	}
	if cfg.DatabaseURL != "" {
		// Replicas share this key: never make one here (see custody keys init).
		if _, err := os.Stat(path); err != nil {
			return nil, nil, fmt.Errorf("--gateway-signing-key %s: %w (with --database-url every replica is given the same key; make it with custody keys init)", path, err)
		}
	}
	key, err := gateway.LoadOrCreateSigningKey(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--gateway-signing-key: %w", err)
	}
	providers, err := cfg.providers()
	if err != nil {
		return nil, nil, usageError{err}
	}
	var policy metering.Policy
	if cfg.GatewayBudgets != "" {
		if policy, err = metering.LoadPolicy(cfg.GatewayBudgets); err != nil {
			return nil, nil, usageError{fmt.Errorf("--gateway-budgets %s: %w", cfg.GatewayBudgets, err)}
		}
	}
	var mm *metering.Metrics
	if reg != nil {
		if mm, err = metering.NewMetrics(reg, slices.Sorted(maps.Keys(providers))); err != nil {
			return nil, nil, err
		}
	}
	meter, err := metering.New(metering.Options{
		Store: db, Policy: policy, DefaultOutputReserve: cfg.GatewayDefaultMaxOutput, Log: log, Metrics: mm,
	})
	if err != nil {
		return nil, nil, err
	}
	gw, err := gateway.New(ctx, gateway.Options{
		Store: db, Providers: providers, KeysDir: cfg.GatewayKeysDir,
		SigningKey: key, Leeway: cfg.gatewayLeeway(), MaxStaleness: cfg.GatewayRevocationMaxStaleness,
		Log: log, Metrics: reg, Recorder: rec, Meter: meter,
	})
	if err != nil {
		meter.Close(ctx)
		return nil, nil, err
	}
	return gw, meter, nil
}
