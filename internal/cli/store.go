package cli

import (
	"context"
	"log/slog"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

// store is what serve keeps in its database: keys, memory, gateway
// revocations and the signer's log, behind each domain's interface.
type store interface {
	apikey.Store
	memory.Store
	gateway.Store
	metering.Store
	signer.Store
	signer.InboxStore
	Ping(ctx context.Context) error
	Close() error
}

var (
	_ store = (*sqlite.DB)(nil)
	_ store = (*postgres.DB)(nil)
)

// openStore opens PostgreSQL at cfg.DatabaseURL, or else SQLite in
// cfg.DataDir.
func openStore(ctx context.Context, cfg ServeConfig, log *slog.Logger) (store, error) {
	if cfg.DatabaseURL != "" {
		db, err := postgres.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return nil, err
		}
		log.InfoContext(ctx, "store: PostgreSQL")
		return db, nil
	}
	db, err := sqlite.Open(ctx, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "store: SQLite", "dir", cfg.DataDir)
	return db, nil
}

// followRevocations evicts keys revoked on other replicas from this
// replica's verification cache as soon as PostgreSQL tells (LISTEN/NOTIFY),
// until ctx ends. SQLite is one process's: nothing to follow.
func followRevocations(ctx context.Context, db store, keys *apikey.Service, log *slog.Logger) {
	pg, ok := db.(*postgres.DB)
	if !ok {
		return
	}
	go func() {
		if err := pg.ListenKeyRevocations(ctx, keys.Evict, keys.EvictAll, log); err != nil && ctx.Err() == nil {
			log.ErrorContext(ctx, "following key revocations stopped; other replicas' revocations take up to --key-cache-ttl", "err", err)
		}
	}()
}

// followGatewayRevocations applies gateway tokens revoked on other
// replicas as soon as PostgreSQL tells (LISTEN/NOTIFY), until ctx ends;
// the gateway's poll of the store is the fallback. SQLite is one
// process's: nothing to follow.
func followGatewayRevocations(ctx context.Context, db store, gw *gateway.Gateway, log *slog.Logger) {
	pg, ok := db.(*postgres.DB)
	if !ok {
		return
	}
	go func() {
		if err := pg.ListenGatewayRevocations(ctx, gw.ApplyRevocation, gw.PollNow, log); err != nil && ctx.Err() == nil {
			log.ErrorContext(ctx, "following gateway revocations stopped; other replicas' revocations take up to a poll interval", "err", err)
		}
	}()
}
