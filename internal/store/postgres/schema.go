package postgres

// migrations are applied in order; migration i brings the schema to
// version i+1 (table custody_schema). Never edit one that has shipped:
// append a new one. Each domain's schema is beside its queries.
var migrations = []string{
	// 1: keys minted by the identity exchange.
	keysSchema,
	// 2: memory.
	memorySchema,
	// 3: model gateway.
	gatewaySchema,
	// 4: witness: the latest tree cosigned per log origin.
	witnessSchema,
	// 5: signer: the log, runs, calls, salts, approvals, checkpoints,
	// policy snapshots, the writer lease.
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
}
