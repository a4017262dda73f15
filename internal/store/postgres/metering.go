package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/metering"
)

var _ metering.Store = (*DB)(nil)

// meteringSchema is migration 9: budgets, open reservations and usage
// rows of the model gateway's metering (see metering.Store). A
// reservation's budgets are a JSON array of metering.Budget (the keys it
// holds, with the limits it asked for; text, not jsonb, which refuses
// \u0000); the limits checked are always those of the budget rows. Keys
// compare bytewise (COLLATE "C") so that Budgets and Usage order as the
// SQLite store does, whatever the database's collation.
//
// Concurrency, at READ COMMITTED: Reserve and Extend check and add with
// one UPDATE ... WHERE per budget, which waits for the row lock and then
// re-checks the newest row version; budgets are locked in BudgetKey
// order, reservations (by Commit and SettleExpired) in id order and
// before any budget, usage rows in key order, so that no two
// transactions wait for each other in a cycle.
const meteringSchema = `CREATE TABLE metering_budgets (
	scope             text COLLATE "C" NOT NULL,
	key               text COLLATE "C" NOT NULL,
	period            text COLLATE "C" NOT NULL,  -- "" unless scope is tenant
	limit_requests    bigint NOT NULL,            -- 0: no limit
	limit_input       bigint NOT NULL,
	limit_output      bigint NOT NULL,
	reserved_requests bigint NOT NULL CHECK (reserved_requests >= 0),
	reserved_input    bigint NOT NULL CHECK (reserved_input >= 0),
	reserved_output   bigint NOT NULL CHECK (reserved_output >= 0),
	spent_requests    bigint NOT NULL CHECK (spent_requests >= 0),
	spent_input       bigint NOT NULL CHECK (spent_input >= 0),
	spent_output      bigint NOT NULL CHECK (spent_output >= 0),
	updated_at        timestamptz NOT NULL,
	PRIMARY KEY (scope, key, period)
);
CREATE TABLE metering_reservations (
	id              text COLLATE "C" PRIMARY KEY,
	budgets         text NOT NULL,                -- JSON array of metering.Budget
	amount_requests bigint NOT NULL,
	amount_input    bigint NOT NULL,
	amount_output   bigint NOT NULL,
	jti             text NOT NULL,
	run_id          text NOT NULL,
	tenant          text NOT NULL,
	agent           text NOT NULL,
	provider        text NOT NULL,
	model           text NOT NULL,
	day             text NOT NULL,                -- UTC day, 2006-01-02
	created_at      timestamptz NOT NULL,
	expires_at      timestamptz NOT NULL
);
CREATE INDEX metering_reservations_expiry ON metering_reservations (expires_at);
CREATE TABLE metering_usage (
	jti             text COLLATE "C" NOT NULL,
	provider        text COLLATE "C" NOT NULL,
	model           text COLLATE "C" NOT NULL,
	day             text COLLATE "C" NOT NULL,    -- UTC day, 2006-01-02
	run_id          text COLLATE "C" NOT NULL,
	tenant          text COLLATE "C" NOT NULL,
	agent           text COLLATE "C" NOT NULL,
	requests        bigint NOT NULL,
	input_tokens    bigint NOT NULL,
	output_tokens   bigint NOT NULL,
	PRIMARY KEY (jti, provider, model, day)
);
CREATE INDEX metering_usage_tenant_day ON metering_usage (tenant, day);
CREATE INDEX metering_usage_run ON metering_usage (tenant, agent, run_id);`

// meterCheckSQL adds $4..$6 to a budget's reserved counters if every
// limited counter still fits: one statement, so the check is made on the
// row version the update writes over (after waiting for its lock).
const meterCheckSQL = `UPDATE metering_budgets SET
	reserved_requests = reserved_requests + $4, reserved_input = reserved_input + $5,
	reserved_output = reserved_output + $6, updated_at = now()
	WHERE scope = $1 AND key = $2 AND period = $3
	AND (limit_requests = 0 OR spent_requests + reserved_requests + $4 <= limit_requests)
	AND (limit_input = 0 OR spent_input + reserved_input + $5 <= limit_input)
	AND (limit_output = 0 OR spent_output + reserved_output + $6 <= limit_output)`

// meterUpsertSQL creates a budget row or sets its limits: a tenant's to
// the given ones ($7 true), a token's or run's to the smaller non-zero
// of stored and given. It takes the row's lock.
const meterUpsertSQL = `INSERT INTO metering_budgets (scope, key, period, limit_requests, limit_input, limit_output,
	reserved_requests, reserved_input, reserved_output, spent_requests, spent_input, spent_output, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, 0, 0, 0, 0, 0, 0, now())
	ON CONFLICT (scope, key, period) DO UPDATE SET
	limit_requests = CASE WHEN $7::boolean OR metering_budgets.limit_requests = 0 OR ($4 <> 0 AND $4 < metering_budgets.limit_requests) THEN $4 ELSE metering_budgets.limit_requests END,
	limit_input = CASE WHEN $7::boolean OR metering_budgets.limit_input = 0 OR ($5 <> 0 AND $5 < metering_budgets.limit_input) THEN $5 ELSE metering_budgets.limit_input END,
	limit_output = CASE WHEN $7::boolean OR metering_budgets.limit_output = 0 OR ($6 <> 0 AND $6 < metering_budgets.limit_output) THEN $6 ELSE metering_budgets.limit_output END,
	updated_at = now()`

// Reserve implements metering.Store, in one transaction that locks the
// budget rows in BudgetKey order.
func (d *DB) Reserve(ctx context.Context, r metering.Reservation) error {
	budgets, err := metering.SortedBudgets(r)
	if err != nil {
		return fmt.Errorf("postgres: reserve: %w", err)
	}
	enc, err := json.Marshal(budgets)
	if err != nil {
		return fmt.Errorf("postgres: reserve: encode budgets: %w", err)
	}
	err = d.tx(ctx, func(tx pgx.Tx) error {
		for _, b := range budgets {
			if _, err := tx.Exec(ctx, meterUpsertSQL, b.Scope, b.Key, b.Period,
				b.Limit.Requests, b.Limit.InputTokens, b.Limit.OutputTokens, b.Scope == metering.ScopeTenant); err != nil {
				return fmt.Errorf("set budget %s: %w", b.BudgetKey, err)
			}
			if err := reserveIn(ctx, tx, b.BudgetKey, r.Amount); err != nil {
				return err
			}
		}
		a := r.Attribution
		_, err := tx.Exec(ctx, `INSERT INTO metering_reservations (id, budgets, amount_requests, amount_input, amount_output,
			jti, run_id, tenant, agent, provider, model, day, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			r.ID, string(enc), r.Amount.Requests, r.Amount.InputTokens, r.Amount.OutputTokens,
			a.JTI, a.RunID, a.Tenant, a.Agent, a.Provider, a.Model, a.Day, r.CreatedAt, r.ExpiresAt)
		if err != nil {
			return fmt.Errorf("record reservation: %w", err)
		}
		return nil
	})
	return meterErr("reserve", err)
}

// reserveIn adds amount to k's reserved counters, or returns an
// *ExceededError naming k if it does not fit.
func reserveIn(ctx context.Context, tx pgx.Tx, k metering.BudgetKey, amount metering.Usage) error {
	tag, err := tx.Exec(ctx, meterCheckSQL, k.Scope, k.Key, k.Period,
		amount.Requests, amount.InputTokens, amount.OutputTokens)
	if err != nil {
		return fmt.Errorf("reserve in budget %s: %w", k, err)
	}
	if tag.RowsAffected() == 0 {
		return &metering.ExceededError{Budget: k}
	}
	return nil
}

// meterErr wraps err for op, leaving the contract's errors recognizable.
func meterErr(op string, err error) error {
	var exceeded *metering.ExceededError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exceeded):
		return exceeded
	case errors.Is(err, metering.ErrNotFound):
		return metering.ErrNotFound
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// Extend implements metering.Store. It locks the reservation, then its
// budgets in BudgetKey order.
func (d *DB) Extend(ctx context.Context, id string, more metering.Usage) error {
	if more.Negative() {
		return fmt.Errorf("postgres: extend %s: negative amount", id)
	}
	err := d.tx(ctx, func(tx pgx.Tx) error {
		var enc string
		err := tx.QueryRow(ctx, `SELECT budgets FROM metering_reservations WHERE id = $1 FOR UPDATE`, id).Scan(&enc)
		if errors.Is(err, pgx.ErrNoRows) {
			return metering.ErrNotFound
		}
		if err != nil {
			return err
		}
		var budgets []metering.Budget
		if err := json.Unmarshal([]byte(enc), &budgets); err != nil {
			return fmt.Errorf("decode budgets of reservation %s: %w", id, err)
		}
		for _, b := range budgets {
			if err := reserveIn(ctx, tx, b.BudgetKey, more); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE metering_reservations SET amount_requests = amount_requests + $1,
			amount_input = amount_input + $2, amount_output = amount_output + $3 WHERE id = $4`,
			more.Requests, more.InputTokens, more.OutputTokens, id)
		return err
	})
	return meterErr("extend", err)
}

const reservationColumns = `id, budgets, amount_requests, amount_input, amount_output,
	jti, run_id, tenant, agent, provider, model, day`

// deleteReservations deletes the reservations that match where (on
// column id, with args) and returns them by id; it locks them in id
// order first (skipping those a concurrent transaction deleted, and
// with skipLocked those it holds).
func deleteReservations(ctx context.Context, tx pgx.Tx, where string, skipLocked bool, args ...any) (map[string]metering.Settled, error) {
	lock := "FOR UPDATE"
	if skipLocked {
		lock += " SKIP LOCKED"
	}
	rows, err := tx.Query(ctx, `DELETE FROM metering_reservations WHERE id IN (SELECT id FROM metering_reservations
		WHERE `+where+` ORDER BY id `+lock+`) RETURNING `+reservationColumns, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]metering.Settled{}
	for rows.Next() {
		var (
			id, enc string
			r       metering.Settled
			a       = &r.Attribution
		)
		if err := rows.Scan(&id, &enc, &r.Amount.Requests, &r.Amount.InputTokens, &r.Amount.OutputTokens,
			&a.JTI, &a.RunID, &a.Tenant, &a.Agent, &a.Provider, &a.Model, &a.Day); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(enc), &r.Budgets); err != nil {
			return nil, fmt.Errorf("decode budgets of reservation %s: %w", id, err)
		}
		r.Actual = r.Amount
		out[id] = r
	}
	return out, rows.Err()
}

// Commit implements metering.Store.
func (d *DB) Commit(ctx context.Context, settles []metering.Settlement, usage []metering.UsageDelta) error {
	if len(settles) == 0 && len(usage) == 0 {
		return nil
	}
	ids := make([]string, 0, len(settles))
	for _, s := range settles {
		ids = append(ids, s.ID)
	}
	err := d.tx(ctx, func(tx pgx.Tx) error {
		var done []metering.Settled
		if len(ids) > 0 {
			open, err := deleteReservations(ctx, tx, "id = ANY($1)", false, ids)
			if err != nil {
				return fmt.Errorf("settle reservations: %w", err)
			}
			for _, s := range settles {
				r, ok := open[s.ID]
				if !ok {
					continue // not open (settled or expired already), or settled by an earlier entry
				}
				delete(open, s.ID)
				r.Actual, r.Attribution = s.Actual, s.Attribution
				done = append(done, r)
			}
		}
		return applySettled(ctx, tx, done, usage)
	})
	return meterErr("commit", err)
}

// SettleExpired implements metering.Store. Reservations another
// transaction holds locked (being settled or extended) are left to it or
// to the next call.
func (d *DB) SettleExpired(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := d.tx(ctx, func(tx pgx.Tx) error {
		open, err := deleteReservations(ctx, tx, "expires_at < $1", true, before)
		if err != nil {
			return err
		}
		done := make([]metering.Settled, 0, len(open))
		for _, r := range open {
			done = append(done, r)
		}
		n = len(done)
		return applySettled(ctx, tx, done, nil)
	})
	if err != nil {
		return 0, meterErr("settle expired", err)
	}
	return n, nil
}

// applySettled moves each settled reservation's amount out of its
// budgets' reserved and its actual into their spent, then adds the
// actual and usage to their usage rows; budgets and usage rows in key
// order.
func applySettled(ctx context.Context, tx pgx.Tx, done []metering.Settled, usage []metering.UsageDelta) error {
	budgets, rows := metering.SettleDeltas(done, usage)
	for _, b := range budgets {
		if _, err := tx.Exec(ctx, `UPDATE metering_budgets SET
			reserved_requests = GREATEST(reserved_requests - $1, 0), reserved_input = GREATEST(reserved_input - $2, 0),
			reserved_output = GREATEST(reserved_output - $3, 0), spent_requests = spent_requests + $4,
			spent_input = spent_input + $5, spent_output = spent_output + $6, updated_at = now()
			WHERE scope = $7 AND key = $8 AND period = $9`,
			b.Release.Requests, b.Release.InputTokens, b.Release.OutputTokens,
			b.Spend.Requests, b.Spend.InputTokens, b.Spend.OutputTokens,
			b.Key.Scope, b.Key.Key, b.Key.Period); err != nil {
			return fmt.Errorf("settle budget %s: %w", b.Key, err)
		}
	}
	for _, u := range rows {
		a := u.Attribution
		if _, err := tx.Exec(ctx, `INSERT INTO metering_usage AS u
			(jti, provider, model, day, run_id, tenant, agent, requests, input_tokens, output_tokens)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (jti, provider, model, day) DO UPDATE SET requests = u.requests + excluded.requests,
			input_tokens = u.input_tokens + excluded.input_tokens, output_tokens = u.output_tokens + excluded.output_tokens`,
			a.JTI, a.Provider, a.Model, a.Day, a.RunID, a.Tenant, a.Agent,
			u.Used.Requests, u.Used.InputTokens, u.Used.OutputTokens); err != nil {
			return fmt.Errorf("add usage: %w", err)
		}
	}
	return nil
}

// Budgets implements metering.Store.
func (d *DB) Budgets(ctx context.Context, f metering.BudgetFilter) ([]metering.BudgetState, error) {
	rows, err := d.pool.Query(ctx, `SELECT scope, key, period, limit_requests, limit_input, limit_output,
		reserved_requests, reserved_input, reserved_output, spent_requests, spent_input, spent_output, updated_at
		FROM metering_budgets WHERE ($1::text = '' OR scope = $1) AND ($2::text = '' OR key = $2) AND ($3::text = '' OR period = $3)
		ORDER BY scope, key, period`, f.Scope, f.Key, f.Period)
	if err != nil {
		return nil, fmt.Errorf("postgres: list budgets: %w", err)
	}
	defer rows.Close()
	var out []metering.BudgetState
	for rows.Next() {
		var (
			b       metering.BudgetState
			updated time.Time
		)
		if err := rows.Scan(&b.Scope, &b.Key, &b.Period, &b.Limit.Requests, &b.Limit.InputTokens, &b.Limit.OutputTokens,
			&b.Reserved.Requests, &b.Reserved.InputTokens, &b.Reserved.OutputTokens,
			&b.Spent.Requests, &b.Spent.InputTokens, &b.Spent.OutputTokens, &updated); err != nil {
			return nil, fmt.Errorf("postgres: list budgets: %w", err)
		}
		b.Updated = updated.UTC()
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list budgets: %w", err)
	}
	return out, nil
}

// Usage implements metering.Store. Without GroupBy it returns one row,
// the total, or none if no usage row matches.
func (d *DB) Usage(ctx context.Context, f metering.UsageFilter) ([]metering.UsageRow, error) {
	group, err := metering.GroupColumns(f.GroupBy)
	if err != nil {
		return nil, fmt.Errorf("postgres: usage: %w", err)
	}
	sel := make([]string, len(metering.GroupFields))
	for i, c := range metering.GroupFields {
		sel[i] = "''::text"
		if slices.Contains(group, c) {
			sel[i] = c
		}
	}
	q := `SELECT ` + strings.Join(sel, ", ") + `, SUM(requests)::bigint, SUM(input_tokens)::bigint, SUM(output_tokens)::bigint
		FROM metering_usage WHERE ($1::text = '' OR jti = $1) AND ($2::text = '' OR run_id = $2) AND ($3::text = '' OR tenant = $3)
		AND ($4::text = '' OR agent = $4) AND ($5::text = '' OR provider = $5) AND ($6::text = '' OR model = $6)
		AND ($7::text = '' OR day >= $7) AND ($8::text = '' OR day <= $8)`
	if len(group) > 0 {
		q += ` GROUP BY ` + strings.Join(group, ", ") + ` ORDER BY ` + strings.Join(group, ", ")
	} else {
		q += ` HAVING COUNT(*) > 0`
	}
	rows, err := d.pool.Query(ctx, q, f.JTI, f.RunID, f.Tenant, f.Agent, f.Provider, f.Model, f.Since, f.Until)
	if err != nil {
		return nil, fmt.Errorf("postgres: usage: %w", err)
	}
	defer rows.Close()
	var out []metering.UsageRow
	for rows.Next() {
		var r metering.UsageRow
		a := &r.Attribution
		if err := rows.Scan(&a.JTI, &a.RunID, &a.Tenant, &a.Agent, &a.Provider, &a.Model, &a.Day,
			&r.Used.Requests, &r.Used.InputTokens, &r.Used.OutputTokens); err != nil {
			return nil, fmt.Errorf("postgres: usage: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: usage: %w", err)
	}
	return out, nil
}
