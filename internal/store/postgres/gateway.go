package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

// GatewayRevocationChannel is the LISTEN/NOTIFY channel on which
// RevokeToken announces a revoked gateway token to every replica, in the
// transaction that revokes it, so a notification is delivered only if the
// revocation commits (again when it was already revoked: a replica that
// missed the first notice catches up then).
//
// # Format
//
// The payload is the token's exp in Unix seconds (decimal), one space and
// its jti (at most 128 bytes), e.g.
//
//	1800001800 3q1uXnXkQw2cL0m8Zk3f1A
//
// Channels are per database, not per schema: deployments sharing a
// database in different schemas see each other's notifications, which
// costs them an entry in their revocation set for a jti they never minted.
const GatewayRevocationChannel = "custody_gateway_token_revoked"

// maxNotifiedJTI bounds the jti of a gateway revocation notification.
const maxNotifiedJTI = 128

// gatewayModelsSchema is migration 6: the model allow-list of each minted
// token, a text[] like providers ('{}' for none). Rows recorded before it
// hold NULL, read back as nil Models: the gateway refuses those tokens
// until they are re-minted (they live at most 24 h).
const gatewayModelsSchema = `ALTER TABLE gateway_tokens ADD COLUMN models text[]; -- model names, NULL if not recorded`

// gatewayBudgetSchema is migration 10: the budget claims of each minted
// token (gateway.TokenRecord Budget and RunBudget), 0 for no limit.
const gatewayBudgetSchema = `ALTER TABLE gateway_tokens ADD COLUMN budget_requests bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN budget_input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN budget_output_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN run_budget_requests bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN run_budget_input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_tokens ADD COLUMN run_budget_output_tokens bigint NOT NULL DEFAULT 0;`

// RecordToken implements gateway.Store. A jti already recorded is an
// error. Nil Models is stored as NULL and empty Models as '{}', so that
// LookupToken keeps them apart.
func (d *DB) RecordToken(ctx context.Context, r gateway.TokenRecord) error {
	providers := r.Providers
	if providers == nil {
		providers = []string{}
	}
	repos, err := encodeRepos(r.Repos)
	if err != nil {
		return err
	}
	_, err = d.pool.Exec(ctx,
		`INSERT INTO gateway_tokens (jti, issued_at, expires_at, providers, models, run_id, tenant, agent,
			budget_requests, budget_input_tokens, budget_output_tokens,
			run_budget_requests, run_budget_input_tokens, run_budget_output_tokens, repos)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		r.JTI, r.IssuedAt.Unix(), r.ExpiresAt.Unix(), providers, r.Models, r.RunID, r.Tenant, r.Agent,
		r.Budget.Requests, r.Budget.InputTokens, r.Budget.OutputTokens,
		r.RunBudget.Requests, r.RunBudget.InputTokens, r.RunBudget.OutputTokens, repos)
	if err != nil {
		return fmt.Errorf("postgres: record gateway token: %w", err)
	}
	return nil
}

// LookupToken implements gateway.Store. Times come back in UTC, whole
// seconds.
func (d *DB) LookupToken(ctx context.Context, jti string) (gateway.TokenRecord, error) {
	r := gateway.TokenRecord{JTI: jti}
	var issued, expires int64
	var repos *string
	err := d.pool.QueryRow(ctx,
		`SELECT issued_at, expires_at, providers, models, run_id, tenant, agent,
			budget_requests, budget_input_tokens, budget_output_tokens,
			run_budget_requests, run_budget_input_tokens, run_budget_output_tokens, repos FROM gateway_tokens WHERE jti = $1`, jti).
		Scan(&issued, &expires, &r.Providers, &r.Models, &r.RunID, &r.Tenant, &r.Agent,
			&r.Budget.Requests, &r.Budget.InputTokens, &r.Budget.OutputTokens,
			&r.RunBudget.Requests, &r.RunBudget.InputTokens, &r.RunBudget.OutputTokens, &repos)
	if errors.Is(err, pgx.ErrNoRows) {
		return gateway.TokenRecord{}, gateway.ErrNotFound
	}
	if err != nil {
		return gateway.TokenRecord{}, fmt.Errorf("postgres: look up gateway token: %w", err)
	}
	if r.Repos, err = decodeRepos(repos); err != nil {
		return gateway.TokenRecord{}, err
	}
	r.IssuedAt = time.Unix(issued, 0).UTC()
	r.ExpiresAt = time.Unix(expires, 0).UTC()
	return r, nil
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
		if err == nil {
			return notifyGatewayRevocation(ctx, tx, rev) // revoked before
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
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
		if rev, err = revocation(ctx, tx, jti); err != nil {
			return err
		}
		return notifyGatewayRevocation(ctx, tx, rev)
	})
	if errors.Is(err, gateway.ErrNotFound) {
		return gateway.Revocation{}, gateway.ErrNotFound
	}
	if err != nil {
		return gateway.Revocation{}, fmt.Errorf("postgres: revoke gateway token: %w", err)
	}
	return rev, nil
}

// notifyGatewayRevocation announces rev on [GatewayRevocationChannel]
// when tx commits.
func notifyGatewayRevocation(ctx context.Context, tx pgx.Tx, rev gateway.Revocation) error {
	if len(rev.JTI) > maxNotifiedJTI {
		return nil // never minted by a gateway; the pollers still see it
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, GatewayRevocationChannel,
		strconv.FormatInt(rev.ExpiresAt.Unix(), 10)+" "+rev.JTI)
	return err
}

// parseGatewayRevocation reads a [GatewayRevocationChannel] payload.
func parseGatewayRevocation(p string) (gateway.Revocation, bool) {
	exp, jti, ok := strings.Cut(p, " ")
	if !ok || jti == "" || len(jti) > maxNotifiedJTI {
		return gateway.Revocation{}, false
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return gateway.Revocation{}, false
	}
	return gateway.Revocation{JTI: jti, ExpiresAt: time.Unix(sec, 0).UTC()}, true
}

// ListenGatewayRevocations delivers the gateway tokens revoked through
// any [DB] on this database (every replica) to revoked, until ctx is
// done, as [DB.ListenKeyRevocations] does for keys (same connection
// handling, checks and backoff): one call per notification on
// [GatewayRevocationChannel], with JTI and ExpiresAt set and Seq zero
// (unknown). Each time it starts listening, the first time included, and
// for a malformed payload, it calls resync: revocations committed while
// it was not listening were not delivered, and the caller must read them
// from the store ([gateway.Gateway.PollNow]).
//
// revoked and resync run on the listener's goroutine, one at a time, and
// must return quickly. It returns nil when ctx is done, and an error only
// if revoked or resync is nil.
func (d *DB) ListenGatewayRevocations(ctx context.Context, revoked func(gateway.Revocation), resync func(), log *slog.Logger) error {
	if revoked == nil || resync == nil {
		return errors.New("postgres: listen for gateway revocations: revoked and resync are required")
	}
	d.listen(ctx, &listener{
		channel: GatewayRevocationChannel, name: "gateway revocation listener",
		notify: func(p string) {
			if rev, ok := parseGatewayRevocation(p); ok {
				revoked(rev)
			} else {
				resync()
			}
		},
		evictAll: resync, log: log,
		pingEvery: listenPingEvery, minBackoff: listenMinBackoff, maxBackoff: listenMaxBackoff,
	})
	return nil
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

// gatewayRunSchema is migration 8: tokens are found by their run, to
// revoke them when the signer closes it.
const gatewayRunSchema = `CREATE INDEX gateway_tokens_run ON gateway_tokens (run_id, tenant, agent);`

// RunTokens implements gateway.Store.
func (d *DB) RunTokens(ctx context.Context, tenant, agent, run string, notBefore time.Time) ([]string, error) {
	rows, err := d.pool.Query(ctx, `SELECT jti FROM gateway_tokens WHERE run_id = $1 AND tenant = $2 AND agent = $3 AND expires_at >= $4`,
		run, tenant, agent, notBefore.Unix())
	if err != nil {
		return nil, fmt.Errorf("postgres: run tokens: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: run tokens: %w", err)
	}
	return out, nil
}
