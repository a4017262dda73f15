package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

var _ apikey.Store = (*DB)(nil)

// InsertKey implements apikey.Store.
func (d *DB) InsertKey(ctx context.Context, r apikey.Record) error {
	id, err := json.Marshal(r.Identity)
	if err != nil {
		return fmt.Errorf("sqlite: encode identity: %w", err)
	}
	_, err = d.exec(ctx,
		`INSERT INTO api_keys (hash, tenant, agent, session, identity, issued_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.Hash[:], r.Identity.Tenant, r.Identity.Agent, r.Identity.Session, string(id), r.IssuedAt.Unix(), r.ExpiresAt.Unix())
	if err != nil {
		return fmt.Errorf("sqlite: insert key: %w", err)
	}
	return nil
}

// LookupKey implements apikey.Store.
func (d *DB) LookupKey(ctx context.Context, hash [32]byte) (apikey.Record, error) {
	var (
		id              string
		issued, expires int64
		revoked         sql.NullInt64
	)
	err := d.db.QueryRowContext(ctx,
		`SELECT identity, issued_at, expires_at, revoked_at FROM api_keys WHERE hash = ?`, hash[:]).
		Scan(&id, &issued, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return apikey.Record{}, apikey.ErrNotFound
	}
	if err != nil {
		return apikey.Record{}, fmt.Errorf("sqlite: look up key: %w", err)
	}
	r := apikey.Record{Hash: hash, IssuedAt: time.Unix(issued, 0).UTC(), ExpiresAt: time.Unix(expires, 0).UTC()}
	if revoked.Valid {
		r.RevokedAt = time.Unix(revoked.Int64, 0).UTC()
	}
	if err := json.Unmarshal([]byte(id), &r.Identity); err != nil {
		return apikey.Record{}, fmt.Errorf("sqlite: decode identity: %w", err)
	}
	return r, nil
}

// RevokeKey implements apikey.Store.
func (d *DB) RevokeKey(ctx context.Context, hash [32]byte, at time.Time) error {
	res, err := d.exec(ctx,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE hash = ?`, at.Unix(), hash[:])
	if err != nil {
		return fmt.Errorf("sqlite: revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return apikey.ErrNotFound
	}
	return nil
}

// RevokeAgentKeys implements apikey.Store.
func (d *DB) RevokeAgentKeys(ctx context.Context, tenant, agent string, at time.Time) ([][32]byte, error) {
	var out [][32]byte
	err := d.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`UPDATE api_keys SET revoked_at = ? WHERE tenant = ? AND agent = ? AND revoked_at IS NULL AND expires_at > ? RETURNING hash`,
			at.Unix(), tenant, agent, at.Unix())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return err
			}
			var h [32]byte
			copy(h[:], b)
			out = append(out, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: revoke agent keys: %w", err)
	}
	return out, nil
}

// DeleteExpiredKeys implements apikey.Store.
func (d *DB) DeleteExpiredKeys(ctx context.Context, before time.Time) (int64, error) {
	res, err := d.exec(ctx, `DELETE FROM api_keys WHERE expires_at < ?`, before.Unix())
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete expired keys: %w", err)
	}
	return res.RowsAffected()
}
