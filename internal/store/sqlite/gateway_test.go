package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestGateway(t *testing.T) {
	storetest.Gateway(t, func(tb testing.TB) gateway.Store { return openTestDB(tb) })
}

// TestGatewayReplicas races handles of several processes on one file.
func TestGatewayReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.GatewayReplicas(t, dbs[0], dbs[1], dbs[2])
}

// TestGatewayRevocationsSurviveReopen: revocations and the Seq counter
// are in the file; a reopened database lists the same revocations and
// never reuses a Seq.
func TestGatewayRevocationsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0).UTC()
	for _, jti := range []string{"a", "b"} {
		if err := db.RecordToken(ctx, gateway.TokenRecord{JTI: jti, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	ra, err := db.RevokeToken(ctx, "a", now)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all, err := db.ListRevocations(ctx, 0)
	if err != nil || len(all) != 1 || all[0].JTI != "a" || all[0].Seq != ra.Seq || !all[0].RevokedAt.Equal(now) {
		t.Fatalf("ListRevocations(0) after reopen = %+v, %v; want [%+v]", all, err, ra)
	}
	rb, err := db.RevokeToken(ctx, "b", now)
	if err != nil || rb.Seq <= ra.Seq {
		t.Errorf("RevokeToken(b) after reopen = %+v, %v; want Seq > %d", rb, err, ra.Seq)
	}
}

// TestGatewayModelsMigration: a token recorded by a binary from before
// migration 6 (schema version 5, no models column) reads back with nil
// Models after the upgrade.
func TestGatewayModelsMigration(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Back to schema version 5 (undoing migrations 6 to 11), then the old
	// binary's INSERT. Its row reads back with no repos either.
	r := storetest.LegacyTokenRecord
	for _, q := range []string{
		`ALTER TABLE gateway_tokens DROP COLUMN repos`, // migration 11
		`ALTER TABLE gateway_tokens DROP COLUMN models`,
		`DROP TABLE signer_inbox`, // migration 7
		`DROP TABLE signer_arg_digests`,
		`DROP INDEX gateway_tokens_run`, // migration 8
		`DROP TABLE metering_budgets`,   // migration 9
		`DROP TABLE metering_reservations`,
		`DROP TABLE metering_usage`,
		`ALTER TABLE gateway_tokens DROP COLUMN budget_requests`, // migration 10
		`ALTER TABLE gateway_tokens DROP COLUMN budget_input_tokens`,
		`ALTER TABLE gateway_tokens DROP COLUMN budget_output_tokens`,
		`ALTER TABLE gateway_tokens DROP COLUMN run_budget_requests`,
		`ALTER TABLE gateway_tokens DROP COLUMN run_budget_input_tokens`,
		`ALTER TABLE gateway_tokens DROP COLUMN run_budget_output_tokens`,
		`PRAGMA user_version = 5`,
		fmt.Sprintf(`INSERT INTO gateway_tokens (jti, issued_at, expires_at, providers, run_id, tenant, agent) VALUES ('%s', %d, %d, '["openai"]', '%s', '%s', '%s')`,
			r.JTI, r.IssuedAt.Unix(), r.ExpiresAt.Unix(), r.RunID, r.Tenant, r.Agent),
	} {
		if _, err := db.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	db, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.GatewayUpgraded(t, db)
}
