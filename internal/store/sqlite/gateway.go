package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
)

var _ gateway.Store = (*DB)(nil)

// gatewaySchema is migration 3: records of minted gateway tokens (never
// the token) and the revocation log the gateway replicas poll by seq.
// AUTOINCREMENT keeps seq increasing and never reused, even after the
// highest rows are pruned; write transactions are serialized, so seq
// order is commit order.
const gatewaySchema = `CREATE TABLE gateway_tokens (
	jti        TEXT PRIMARY KEY,
	issued_at  INTEGER NOT NULL,     -- unix seconds
	expires_at INTEGER NOT NULL,     -- unix seconds, the token's exp
	providers  TEXT NOT NULL,        -- JSON array of provider names
	run_id     TEXT NOT NULL,
	tenant     TEXT NOT NULL,
	agent      TEXT NOT NULL
) STRICT;
CREATE INDEX gateway_tokens_expiry ON gateway_tokens (expires_at);
CREATE TABLE gateway_revocations (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	jti        TEXT NOT NULL UNIQUE,
	revoked_at INTEGER NOT NULL,     -- unix seconds
	expires_at INTEGER NOT NULL      -- unix seconds, the token's exp
) STRICT;
CREATE INDEX gateway_revocations_expiry ON gateway_revocations (expires_at);`

// gatewayModelsSchema is migration 6: the model allow-list of each minted
// token, a JSON array ("[]" for none). Rows recorded before it hold NULL,
// read back as nil Models: the gateway refuses those tokens until they
// are re-minted (they live at most 24 h).
const gatewayModelsSchema = `ALTER TABLE gateway_tokens ADD COLUMN models TEXT; -- JSON array of model names, NULL if not recorded`

// RecordToken implements gateway.Store. Nil Models is stored as NULL and
// empty Models as "[]", so that LookupToken keeps them apart.
func (d *DB) RecordToken(ctx context.Context, r gateway.TokenRecord) error {
	providers, err := json.Marshal(r.Providers)
	if err != nil {
		return fmt.Errorf("sqlite: encode providers: %w", err)
	}
	var models sql.NullString
	if r.Models != nil {
		b, err := json.Marshal(r.Models)
		if err != nil {
			return fmt.Errorf("sqlite: encode models: %w", err)
		}
		models = sql.NullString{String: string(b), Valid: true}
	}
	repos, err := encodeRepos(r.Repos)
	if err != nil {
		return err
	}
	_, err = d.exec(ctx,
		`INSERT INTO gateway_tokens (jti, issued_at, expires_at, providers, models, run_id, tenant, agent,
			budget_requests, budget_input_tokens, budget_output_tokens,
			run_budget_requests, run_budget_input_tokens, run_budget_output_tokens, repos) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.JTI, r.IssuedAt.Unix(), r.ExpiresAt.Unix(), string(providers), models, r.RunID, r.Tenant, r.Agent,
		r.Budget.Requests, r.Budget.InputTokens, r.Budget.OutputTokens,
		r.RunBudget.Requests, r.RunBudget.InputTokens, r.RunBudget.OutputTokens, repos)
	if err != nil {
		return fmt.Errorf("sqlite: record gateway token: %w", err)
	}
	return nil
}

// LookupToken implements gateway.Store.
func (d *DB) LookupToken(ctx context.Context, jti string) (gateway.TokenRecord, error) {
	var (
		r               gateway.TokenRecord
		issued, expires int64
		providers       string
		models, repos   sql.NullString
	)
	err := d.db.QueryRowContext(ctx,
		`SELECT issued_at, expires_at, providers, models, run_id, tenant, agent,
			budget_requests, budget_input_tokens, budget_output_tokens,
			run_budget_requests, run_budget_input_tokens, run_budget_output_tokens, repos FROM gateway_tokens WHERE jti = ?`, jti).
		Scan(&issued, &expires, &providers, &models, &r.RunID, &r.Tenant, &r.Agent,
			&r.Budget.Requests, &r.Budget.InputTokens, &r.Budget.OutputTokens,
			&r.RunBudget.Requests, &r.RunBudget.InputTokens, &r.RunBudget.OutputTokens, &repos)
	if errors.Is(err, sql.ErrNoRows) {
		return gateway.TokenRecord{}, gateway.ErrNotFound
	}
	if err != nil {
		return gateway.TokenRecord{}, fmt.Errorf("sqlite: look up gateway token: %w", err)
	}
	if err := json.Unmarshal([]byte(providers), &r.Providers); err != nil {
		return gateway.TokenRecord{}, fmt.Errorf("sqlite: decode providers: %w", err)
	}
	if models.Valid {
		if err := json.Unmarshal([]byte(models.String), &r.Models); err != nil {
			return gateway.TokenRecord{}, fmt.Errorf("sqlite: decode models: %w", err)
		}
		if r.Models == nil { // JSON null: not a list, never written by RecordToken
			return gateway.TokenRecord{}, errors.New("sqlite: decode models: not a JSON array")
		}
	}
	if r.Repos, err = decodeRepos(repos); err != nil {
		return gateway.TokenRecord{}, err
	}
	r.JTI = jti
	r.IssuedAt = time.Unix(issued, 0).UTC()
	r.ExpiresAt = time.Unix(expires, 0).UTC()
	return r, nil
}

// RevokeToken implements gateway.Store.
func (d *DB) RevokeToken(ctx context.Context, jti string, at time.Time) (gateway.Revocation, error) {
	rev := gateway.Revocation{JTI: jti}
	err := d.tx(ctx, func(tx *sql.Tx) error {
		var exp int64
		err := tx.QueryRowContext(ctx, `SELECT expires_at FROM gateway_tokens WHERE jti = ?`, jti).Scan(&exp)
		if errors.Is(err, sql.ErrNoRows) {
			return gateway.ErrNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO gateway_revocations (jti, revoked_at, expires_at) VALUES (?, ?, ?) ON CONFLICT (jti) DO NOTHING`,
			jti, at.Unix(), exp); err != nil {
			return err
		}
		var revoked int64
		if err := tx.QueryRowContext(ctx,
			`SELECT seq, revoked_at, expires_at FROM gateway_revocations WHERE jti = ?`, jti).
			Scan(&rev.Seq, &revoked, &exp); err != nil {
			return err
		}
		rev.RevokedAt = time.Unix(revoked, 0).UTC()
		rev.ExpiresAt = time.Unix(exp, 0).UTC()
		return nil
	})
	if errors.Is(err, gateway.ErrNotFound) {
		return gateway.Revocation{}, gateway.ErrNotFound
	}
	if err != nil {
		return gateway.Revocation{}, fmt.Errorf("sqlite: revoke gateway token: %w", err)
	}
	return rev, nil
}

// ListRevocations implements gateway.Store.
func (d *DB) ListRevocations(ctx context.Context, sinceExclusive int64) ([]gateway.Revocation, error) {
	rows, err := d.db.QueryContext(ctx,
		`SELECT seq, jti, revoked_at, expires_at FROM gateway_revocations WHERE seq > ? ORDER BY seq`, sinceExclusive)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list gateway revocations: %w", err)
	}
	defer rows.Close()
	var out []gateway.Revocation
	for rows.Next() {
		var (
			r                gateway.Revocation
			revoked, expires int64
		)
		if err := rows.Scan(&r.Seq, &r.JTI, &revoked, &expires); err != nil {
			return nil, fmt.Errorf("sqlite: list gateway revocations: %w", err)
		}
		r.RevokedAt = time.Unix(revoked, 0).UTC()
		r.ExpiresAt = time.Unix(expires, 0).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list gateway revocations: %w", err)
	}
	return out, nil
}

// PruneExpired implements gateway.Store.
func (d *DB) PruneExpired(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := d.tx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM gateway_revocations WHERE expires_at < ?`,
			`DELETE FROM gateway_tokens WHERE expires_at < ?`,
		} {
			res, err := tx.ExecContext(ctx, q, before.Unix())
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune gateway tokens: %w", err)
	}
	return n, nil
}

// gatewayBudgetSchema is migration 10: the budget claims of each minted
// token (gateway.TokenRecord Budget and RunBudget), 0 for no limit.
const gatewayBudgetSchema = `ALTER TABLE gateway_tokens ADD COLUMN budget_requests INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN budget_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN budget_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN run_budget_requests INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN run_budget_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN run_budget_output_tokens INTEGER NOT NULL DEFAULT 0;`

// gatewayRunSchema is migration 8: tokens are found by their run, to
// revoke them when the signer closes it.
const gatewayRunSchema = `CREATE INDEX gateway_tokens_run ON gateway_tokens (run_id, tenant, agent);`

// RunTokens implements gateway.Store.
func (d *DB) RunTokens(ctx context.Context, tenant, agent, run string, notBefore time.Time) ([]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT jti FROM gateway_tokens WHERE run_id = ? AND tenant = ? AND agent = ? AND expires_at >= ?`,
		run, tenant, agent, notBefore.Unix())
	if err != nil {
		return nil, fmt.Errorf("sqlite: run tokens: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var jti string
		if err := rows.Scan(&jti); err != nil {
			return nil, fmt.Errorf("sqlite: run tokens: %w", err)
		}
		out = append(out, jti)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: run tokens: %w", err)
	}
	return out, nil
}
