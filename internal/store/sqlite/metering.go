package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/metering"
)

var _ metering.Store = (*DB)(nil)

// meteringSchema is migration 9: budgets, open reservations and usage
// rows of the model gateway's metering (see metering.Store). Times are
// unix milliseconds. A reservation's budgets are a JSON array of
// metering.Budget (the keys it holds, with the limits it asked for); the
// limits checked are always those of the budget rows.
const meteringSchema = `CREATE TABLE metering_budgets (
	scope           TEXT NOT NULL,
	key             TEXT NOT NULL,
	period          TEXT NOT NULL,       -- "" unless scope is tenant
	limit_requests  INTEGER NOT NULL,    -- 0: no limit
	limit_input     INTEGER NOT NULL,
	limit_output    INTEGER NOT NULL,
	reserved_requests INTEGER NOT NULL CHECK (reserved_requests >= 0),
	reserved_input    INTEGER NOT NULL CHECK (reserved_input >= 0),
	reserved_output   INTEGER NOT NULL CHECK (reserved_output >= 0),
	spent_requests  INTEGER NOT NULL CHECK (spent_requests >= 0),
	spent_input     INTEGER NOT NULL CHECK (spent_input >= 0),
	spent_output    INTEGER NOT NULL CHECK (spent_output >= 0),
	updated_at      INTEGER NOT NULL,    -- unix milliseconds
	PRIMARY KEY (scope, key, period)
) STRICT;
CREATE TABLE metering_reservations (
	id              TEXT PRIMARY KEY,
	budgets         TEXT NOT NULL,       -- JSON array of metering.Budget
	amount_requests INTEGER NOT NULL,
	amount_input    INTEGER NOT NULL,
	amount_output   INTEGER NOT NULL,
	jti             TEXT NOT NULL,
	run_id          TEXT NOT NULL,
	tenant          TEXT NOT NULL,
	agent           TEXT NOT NULL,
	provider        TEXT NOT NULL,
	model           TEXT NOT NULL,
	day             TEXT NOT NULL,       -- UTC day, 2006-01-02
	created_at      INTEGER NOT NULL,    -- unix milliseconds
	expires_at      INTEGER NOT NULL     -- unix milliseconds
) STRICT;
CREATE INDEX metering_reservations_expiry ON metering_reservations (expires_at);
CREATE TABLE metering_usage (
	jti             TEXT NOT NULL,
	provider        TEXT NOT NULL,
	model           TEXT NOT NULL,
	day             TEXT NOT NULL,       -- UTC day, 2006-01-02
	run_id          TEXT NOT NULL,
	tenant          TEXT NOT NULL,
	agent           TEXT NOT NULL,
	requests        INTEGER NOT NULL,
	input_tokens    INTEGER NOT NULL,
	output_tokens   INTEGER NOT NULL,
	PRIMARY KEY (jti, provider, model, day)
) STRICT;
CREATE INDEX metering_usage_tenant_day ON metering_usage (tenant, day);
CREATE INDEX metering_usage_run ON metering_usage (tenant, agent, run_id);`

// meterCheckSQL adds ?4..?6 to a budget's reserved counters if every
// limited counter still fits: the check and the write are one statement
// of an IMMEDIATE transaction.
const meterCheckSQL = `UPDATE metering_budgets SET
	reserved_requests = reserved_requests + ?4, reserved_input = reserved_input + ?5,
	reserved_output = reserved_output + ?6, updated_at = ?7
	WHERE scope = ?1 AND key = ?2 AND period = ?3
	AND (limit_requests = 0 OR spent_requests + reserved_requests + ?4 <= limit_requests)
	AND (limit_input = 0 OR spent_input + reserved_input + ?5 <= limit_input)
	AND (limit_output = 0 OR spent_output + reserved_output + ?6 <= limit_output)`

// meterUpsertSQL creates a budget row or sets its limits: a tenant's to
// the given ones (?8 true), a token's or run's to the smaller non-zero
// of stored and given.
const meterUpsertSQL = `INSERT INTO metering_budgets (scope, key, period, limit_requests, limit_input, limit_output,
	reserved_requests, reserved_input, reserved_output, spent_requests, spent_input, spent_output, updated_at)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0, 0, 0, 0, 0, ?7)
	ON CONFLICT (scope, key, period) DO UPDATE SET
	limit_requests = CASE WHEN ?8 OR limit_requests = 0 OR (?4 <> 0 AND ?4 < limit_requests) THEN ?4 ELSE limit_requests END,
	limit_input = CASE WHEN ?8 OR limit_input = 0 OR (?5 <> 0 AND ?5 < limit_input) THEN ?5 ELSE limit_input END,
	limit_output = CASE WHEN ?8 OR limit_output = 0 OR (?6 <> 0 AND ?6 < limit_output) THEN ?6 ELSE limit_output END,
	updated_at = ?7`

// Reserve implements metering.Store, in one IMMEDIATE transaction.
func (d *DB) Reserve(ctx context.Context, r metering.Reservation) error {
	budgets, err := metering.SortedBudgets(r)
	if err != nil {
		return fmt.Errorf("sqlite: reserve: %w", err)
	}
	enc, err := json.Marshal(budgets)
	if err != nil {
		return fmt.Errorf("sqlite: reserve: encode budgets: %w", err)
	}
	now := millis(time.Now())
	err = d.tx(ctx, func(tx *sql.Tx) error {
		for _, b := range budgets {
			if _, err := tx.ExecContext(ctx, meterUpsertSQL, b.Scope, b.Key, b.Period,
				b.Limit.Requests, b.Limit.InputTokens, b.Limit.OutputTokens, now, b.Scope == metering.ScopeTenant); err != nil {
				return fmt.Errorf("set budget %s: %w", b.BudgetKey, err)
			}
			if err := reserveIn(ctx, tx, b.BudgetKey, r.Amount, now); err != nil {
				return err
			}
		}
		a := r.Attribution
		_, err := tx.ExecContext(ctx, `INSERT INTO metering_reservations (id, budgets, amount_requests, amount_input, amount_output,
			jti, run_id, tenant, agent, provider, model, day, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, string(enc), r.Amount.Requests, r.Amount.InputTokens, r.Amount.OutputTokens,
			a.JTI, a.RunID, a.Tenant, a.Agent, a.Provider, a.Model, a.Day, millis(r.CreatedAt), millis(r.ExpiresAt))
		if err != nil {
			return fmt.Errorf("record reservation: %w", err)
		}
		return nil
	})
	return meterErr("reserve", err)
}

// reserveIn adds amount to k's reserved counters, or returns an
// *ExceededError naming k if it does not fit.
func reserveIn(ctx context.Context, tx *sql.Tx, k metering.BudgetKey, amount metering.Usage, now int64) error {
	res, err := tx.ExecContext(ctx, meterCheckSQL, k.Scope, k.Key, k.Period,
		amount.Requests, amount.InputTokens, amount.OutputTokens, now)
	if err != nil {
		return fmt.Errorf("reserve in budget %s: %w", k, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
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
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// Extend implements metering.Store.
func (d *DB) Extend(ctx context.Context, id string, more metering.Usage) error {
	if more.Negative() {
		return fmt.Errorf("sqlite: extend %s: negative amount", id)
	}
	now := millis(time.Now())
	err := d.tx(ctx, func(tx *sql.Tx) error {
		var enc string
		err := tx.QueryRowContext(ctx, `SELECT budgets FROM metering_reservations WHERE id = ?`, id).Scan(&enc)
		if errors.Is(err, sql.ErrNoRows) {
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
			if err := reserveIn(ctx, tx, b.BudgetKey, more, now); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE metering_reservations SET amount_requests = amount_requests + ?,
			amount_input = amount_input + ?, amount_output = amount_output + ? WHERE id = ?`,
			more.Requests, more.InputTokens, more.OutputTokens, id)
		return err
	})
	return meterErr("extend", err)
}

const reservationColumns = `id, budgets, amount_requests, amount_input, amount_output,
	jti, run_id, tenant, agent, provider, model, day`

func scanReservation(s scanner) (string, metering.Settled, error) {
	var (
		id, enc string
		r       metering.Settled
		a       = &r.Attribution
	)
	if err := s.Scan(&id, &enc, &r.Amount.Requests, &r.Amount.InputTokens, &r.Amount.OutputTokens,
		&a.JTI, &a.RunID, &a.Tenant, &a.Agent, &a.Provider, &a.Model, &a.Day); err != nil {
		return "", metering.Settled{}, err
	}
	if err := json.Unmarshal([]byte(enc), &r.Budgets); err != nil {
		return "", metering.Settled{}, fmt.Errorf("decode budgets of reservation %s: %w", id, err)
	}
	r.Actual = r.Amount
	return id, r, nil
}

// Commit implements metering.Store.
func (d *DB) Commit(ctx context.Context, settles []metering.Settlement, usage []metering.UsageDelta) error {
	if len(settles) == 0 && len(usage) == 0 {
		return nil
	}
	err := d.tx(ctx, func(tx *sql.Tx) error {
		var done []metering.Settled
		seen := map[string]bool{}
		for _, s := range settles {
			if seen[s.ID] {
				continue
			}
			seen[s.ID] = true
			_, r, err := scanReservation(tx.QueryRowContext(ctx,
				`DELETE FROM metering_reservations WHERE id = ? RETURNING `+reservationColumns, s.ID))
			if errors.Is(err, sql.ErrNoRows) {
				continue // not open: settled or expired already
			}
			if err != nil {
				return fmt.Errorf("settle reservation %s: %w", s.ID, err)
			}
			r.Actual, r.Attribution = s.Actual, s.Attribution
			done = append(done, r)
		}
		return applySettled(ctx, tx, done, usage)
	})
	return meterErr("commit", err)
}

// SettleExpired implements metering.Store.
func (d *DB) SettleExpired(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := d.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`DELETE FROM metering_reservations WHERE expires_at < ? RETURNING `+reservationColumns, millis(before))
		if err != nil {
			return err
		}
		var done []metering.Settled
		for rows.Next() {
			_, r, err := scanReservation(rows)
			if err != nil {
				rows.Close()
				return err
			}
			done = append(done, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
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
func applySettled(ctx context.Context, tx *sql.Tx, done []metering.Settled, usage []metering.UsageDelta) error {
	budgets, rows := metering.SettleDeltas(done, usage)
	now := millis(time.Now())
	for _, b := range budgets {
		if _, err := tx.ExecContext(ctx, `UPDATE metering_budgets SET
			reserved_requests = MAX(reserved_requests - ?, 0), reserved_input = MAX(reserved_input - ?, 0),
			reserved_output = MAX(reserved_output - ?, 0), spent_requests = spent_requests + ?,
			spent_input = spent_input + ?, spent_output = spent_output + ?, updated_at = ?
			WHERE scope = ? AND key = ? AND period = ?`,
			b.Release.Requests, b.Release.InputTokens, b.Release.OutputTokens,
			b.Spend.Requests, b.Spend.InputTokens, b.Spend.OutputTokens, now,
			b.Key.Scope, b.Key.Key, b.Key.Period); err != nil {
			return fmt.Errorf("settle budget %s: %w", b.Key, err)
		}
	}
	for _, u := range rows {
		a := u.Attribution
		if _, err := tx.ExecContext(ctx, `INSERT INTO metering_usage
			(jti, provider, model, day, run_id, tenant, agent, requests, input_tokens, output_tokens)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (jti, provider, model, day) DO UPDATE SET requests = requests + excluded.requests,
			input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens`,
			a.JTI, a.Provider, a.Model, a.Day, a.RunID, a.Tenant, a.Agent,
			u.Used.Requests, u.Used.InputTokens, u.Used.OutputTokens); err != nil {
			return fmt.Errorf("add usage: %w", err)
		}
	}
	return nil
}

// Budgets implements metering.Store.
func (d *DB) Budgets(ctx context.Context, f metering.BudgetFilter) ([]metering.BudgetState, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT scope, key, period, limit_requests, limit_input, limit_output,
		reserved_requests, reserved_input, reserved_output, spent_requests, spent_input, spent_output, updated_at
		FROM metering_budgets WHERE (?1 = '' OR scope = ?1) AND (?2 = '' OR key = ?2) AND (?3 = '' OR period = ?3)
		ORDER BY scope, key, period`, f.Scope, f.Key, f.Period)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list budgets: %w", err)
	}
	defer rows.Close()
	var out []metering.BudgetState
	for rows.Next() {
		var (
			b       metering.BudgetState
			updated int64
		)
		if err := rows.Scan(&b.Scope, &b.Key, &b.Period, &b.Limit.Requests, &b.Limit.InputTokens, &b.Limit.OutputTokens,
			&b.Reserved.Requests, &b.Reserved.InputTokens, &b.Reserved.OutputTokens,
			&b.Spent.Requests, &b.Spent.InputTokens, &b.Spent.OutputTokens, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: list budgets: %w", err)
		}
		b.Updated = fromMillis(updated)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list budgets: %w", err)
	}
	return out, nil
}

// Usage implements metering.Store. Without GroupBy it returns one row,
// the total, or none if no usage row matches.
func (d *DB) Usage(ctx context.Context, f metering.UsageFilter) ([]metering.UsageRow, error) {
	group, err := metering.GroupColumns(f.GroupBy)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	sel := make([]string, len(metering.GroupFields))
	for i, c := range metering.GroupFields {
		sel[i] = "''"
		if slices.Contains(group, c) {
			sel[i] = c
		}
	}
	q := `SELECT ` + strings.Join(sel, ", ") + `, SUM(requests), SUM(input_tokens), SUM(output_tokens)
		FROM metering_usage WHERE (?1 = '' OR jti = ?1) AND (?2 = '' OR run_id = ?2) AND (?3 = '' OR tenant = ?3)
		AND (?4 = '' OR agent = ?4) AND (?5 = '' OR provider = ?5) AND (?6 = '' OR model = ?6)
		AND (?7 = '' OR day >= ?7) AND (?8 = '' OR day <= ?8)`
	if len(group) > 0 {
		q += ` GROUP BY ` + strings.Join(group, ", ") + ` ORDER BY ` + strings.Join(group, ", ")
	} else {
		q += ` HAVING COUNT(*) > 0`
	}
	rows, err := d.db.QueryContext(ctx, q, f.JTI, f.RunID, f.Tenant, f.Agent, f.Provider, f.Model, f.Since, f.Until)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	defer rows.Close()
	var out []metering.UsageRow
	for rows.Next() {
		var r metering.UsageRow
		a := &r.Attribution
		if err := rows.Scan(&a.JTI, &a.RunID, &a.Tenant, &a.Agent, &a.Provider, &a.Model, &a.Day,
			&r.Used.Requests, &r.Used.InputTokens, &r.Used.OutputTokens); err != nil {
			return nil, fmt.Errorf("sqlite: usage: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	return out, nil
}
