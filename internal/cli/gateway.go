package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentcustody/custody/internal/gateway"
)

func newGateway(ctx context.Context, cfg ServeConfig, db gateway.Store, reg prometheus.Registerer, rec gateway.Recorder, log *slog.Logger) (*gateway.Gateway, error) {
	path := cfg.GatewaySigningKey
	if path == "" {
		path = filepath.Join(cfg.DataDir, gateway.SigningKeyFile)
	}
	if cfg.DatabaseURL != "" {
		// Replicas share this key: never make one here (see custody keys init).
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--gateway-signing-key %s: %w (with --database-url every replica is given the same key; make it with custody keys init)", path, err)
		}
	}
	key, err := gateway.LoadOrCreateSigningKey(path)
	if err != nil {
		return nil, fmt.Errorf("--gateway-signing-key: %w", err)
	}
	providers, err := cfg.providers()
	if err != nil {
		return nil, usageError{err}
	}
	return gateway.New(ctx, gateway.Options{
		Store: db, Providers: providers, KeysDir: cfg.GatewayKeysDir,
		SigningKey: key, Leeway: cfg.gatewayLeeway(), MaxStaleness: cfg.GatewayRevocationMaxStaleness,
		Log: log, Metrics: reg, Recorder: rec,
	})
}
