package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/gateway"
)

var _ gateway.Store = (*DB)(nil)

// gatewaySchema is migration 3: records of minted gateway tokens (never
// the token) and the revocation log the gateway replicas poll by seq.
//
// A sequence is not enough for seq: nextval is not transactional, so a
// transaction that drew seq 7 can commit after one that drew seq 8, and a
// poller that has seen 8 would never ask for 7. Instead seq is taken from
// the single row of gateway_revocation_seq, updated in the transaction
// that inserts the revocation: the row lock serializes revocations until
// commit, so seq order is commit order. The counter only grows, so a seq
// is never reused after its revocation is pruned. Times are Unix seconds,
// as in the SQLite store.
const gatewaySchema = `CREATE TABLE gateway_tokens (
	jti        text PRIMARY KEY,
	issued_at  bigint NOT NULL,  -- unix seconds
	expires_at bigint NOT NULL,  -- unix seconds, the token's exp
	providers  text[] NOT NULL,  -- provider names
	run_id     text NOT NULL,
	tenant     text NOT NULL,
	agent      text NOT NULL
);
CREATE INDEX gateway_tokens_expiry ON gateway_tokens (expires_at);
CREATE TABLE gateway_revocations (
	seq        bigint PRIMARY KEY CHECK (seq > 0),
	jti        text NOT NULL UNIQUE,
	revoked_at bigint NOT NULL,  -- unix seconds
	expires_at bigint NOT NULL   -- unix seconds, the token's exp
);
CREATE INDEX gateway_revocations_expiry ON gateway_revocations (expires_at);
CREATE TABLE gateway_revocation_seq (
	one  boolean PRIMARY KEY DEFAULT true CHECK (one),
	last bigint NOT NULL      -- the largest seq handed out
);
INSERT INTO gateway_revocation_seq (last) VALUES (0);`

// RecordToken implements gateway.Store. A jti already recorded is an
// error.
func (d *DB) RecordToken(ctx context.Context, r gateway.TokenRecord) error {
	providers := r.Providers
	if providers == nil {
		providers = []string{}
	}
	_, err := d.pool.Exec(ctx,
		`INSERT INTO gateway_tokens (jti, issued_at, expires_at, providers, run_id, tenant, agent) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		r.JTI, r.IssuedAt.Unix(), r.ExpiresAt.Unix(), providers, r.RunID, r.Tenant, r.Agent)
	if err != nil {
		return fmt.Errorf("postgres: record gateway token: %w", err)
	}
	return nil
}

// RevokeToken implements gateway.Store. Times come back in UTC, whole
// seconds. A first revocation waits for every revocation in progress to
// commit or roll back (see gatewaySchema); revoking again does not.
func (d *DB) RevokeToken(ctx context.Context, jti string, at time.Time) (gateway.Revocation, error) {
	var rev gateway.Revocation
	err := d.tx(ctx, func(tx pgx.Tx) error {
		var exp int64
		err := tx.QueryRow(ctx, `SELECT expires_at FROM gateway_tokens WHERE jti = $1`, jti).Scan(&exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return gateway.ErrNotFound
		}
		if err != nil {
			return err
		}
		rev, err = revocation(ctx, tx, jti)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err // revoked before, or failed
		}
		var seq int64
		if err := tx.QueryRow(ctx,
			`UPDATE gateway_revocation_seq SET last = last + 1 RETURNING last`).Scan(&seq); err != nil {
			return err
		}
		// A concurrent first revocation of jti committed before this
		// transaction got the counter: keep it (the counter's gap is
		// harmless: seq need not be dense).
		if _, err := tx.Exec(ctx,
			`INSERT INTO gateway_revocations (seq, jti, revoked_at, expires_at) VALUES ($1, $2, $3, $4) ON CONFLICT (jti) DO NOTHING`,
			seq, jti, at.Unix(), exp); err != nil {
			return err
		}
		rev, err = revocation(ctx, tx, jti)
		return err
	})
	if errors.Is(err, gateway.ErrNotFound) {
		return gateway.Revocation{}, gateway.ErrNotFound
	}
	if err != nil {
		return gateway.Revocation{}, fmt.Errorf("postgres: revoke gateway token: %w", err)
	}
	return rev, nil
}

// revocation reads jti's revocation, or fails with pgx.ErrNoRows.
func revocation(ctx context.Context, tx pgx.Tx, jti string) (gateway.Revocation, error) {
	var revoked, expires int64
	rev := gateway.Revocation{JTI: jti}
	err := tx.QueryRow(ctx, `SELECT seq, revoked_at, expires_at FROM gateway_revocations WHERE jti = $1`, jti).
		Scan(&rev.Seq, &revoked, &expires)
	if err != nil {
		return gateway.Revocation{}, err
	}
	rev.RevokedAt = time.Unix(revoked, 0).UTC()
	rev.ExpiresAt = time.Unix(expires, 0).UTC()
	return rev, nil
}

// ListRevocations implements gateway.Store, reading one snapshot.
func (d *DB) ListRevocations(ctx context.Context, sinceExclusive int64) ([]gateway.Revocation, error) {
	rows, err := d.pool.Query(ctx,
		`SELECT seq, jti, revoked_at, expires_at FROM gateway_revocations WHERE seq > $1 ORDER BY seq`, sinceExclusive)
	if err != nil {
		return nil, fmt.Errorf("postgres: list gateway revocations: %w", err)
	}
	var (
		out              []gateway.Revocation
		r                gateway.Revocation
		revoked, expires int64
	)
	_, err = pgx.ForEachRow(rows, []any{&r.Seq, &r.JTI, &revoked, &expires}, func() error {
		r.RevokedAt = time.Unix(revoked, 0).UTC()
		r.ExpiresAt = time.Unix(expires, 0).UTC()
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list gateway revocations: %w", err)
	}
	return out, nil
}

// PruneExpired implements gateway.Store in one transaction. The seq
// counter is kept, so seqs are never reused.
func (d *DB) PruneExpired(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := d.tx(ctx, func(tx pgx.Tx) error {
		for _, q := range []string{
			`DELETE FROM gateway_revocations WHERE expires_at < $1`,
			`DELETE FROM gateway_tokens WHERE expires_at < $1`,
		} {
			tag, err := tx.Exec(ctx, q, before.Unix())
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: prune gateway tokens: %w", err)
	}
	return n, nil
}
