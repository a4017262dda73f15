package sqlite

// migrations are applied in order; migration i brings the schema to
// user_version i+1. Never edit one that has shipped: append a new one.
var migrations = []string{
	// 1: keys minted by the identity exchange.
	`CREATE TABLE api_keys (
		hash       BLOB PRIMARY KEY,     -- SHA-256 of the key string
		tenant     TEXT NOT NULL,
		agent      TEXT NOT NULL,
		session    TEXT NOT NULL,
		identity   TEXT NOT NULL,        -- apikey.Identity as JSON
		issued_at  INTEGER NOT NULL,     -- unix seconds
		expires_at INTEGER NOT NULL,     -- unix seconds
		revoked_at INTEGER               -- unix seconds, NULL while live
	) STRICT;
	CREATE INDEX api_keys_agent ON api_keys (tenant, agent, expires_at);`,
	// 2: memory.
	memorySchema,
	// 3: model gateway.
	gatewaySchema,
	// 4: witness: the latest tree cosigned per log origin.
	witnessSchema,
	// 5: signer: the log's leaves and stored hashes, runs, calls, args
	// salts, approvals, checkpoints, policy snapshots.
	signerSchema,
	// 6: model gateway: the model allow-list of each minted token.
	gatewayModelsSchema,
	// 7: signer: the model-call inbox and the argument digests of runs.
	signerInboxSchema,
	// 8: model gateway: tokens by run (revoked when the run closes).
	gatewayRunSchema,
	// 9: metering: budgets, open reservations, usage rows.
	meteringSchema,
	// 10: model gateway: the budget claims of each minted token.
	gatewayBudgetSchema,
	// 11: model gateway: the repository grants of each minted token.
	gatewayReposSchema,
	// 12: signer: argument digests keyed by their leaf only.
	signerDigestsByLeaf,
}
