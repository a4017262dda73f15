package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

// stateRow is a memory_state row.
type stateRow struct {
	state memory.State
	// epoch is the last epoch granted, kept after a release.
	epoch int64
	// holderKey is memory.HolderKey of the lease holder ("" if none).
	holderKey string
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Statements of working state and leases.
const (
	sqlGetState = `SELECT version, state, updated_at, updated_by, lease_epoch, lease_holder, lease_identity, lease_expires_at
		FROM memory_state WHERE tenant = ? AND agent = ? AND name = ?`
	sqlInsertLease = `INSERT INTO memory_state (tenant, agent, name, version, lease_epoch, lease_holder, lease_identity, lease_expires_at)
		VALUES (?, ?, ?, 0, 1, ?, ?, ?)`
	sqlUpdateLease = `UPDATE memory_state SET lease_epoch = ?, lease_holder = ?, lease_identity = ?, lease_expires_at = ?
		WHERE tenant = ? AND agent = ? AND name = ?`
	sqlPutState = `UPDATE memory_state SET version = version + 1, state = ?, updated_at = ?, updated_by = ?
		WHERE tenant = ? AND agent = ? AND name = ?`
	sqlReleaseLease = `UPDATE memory_state SET lease_holder = NULL, lease_identity = NULL, lease_expires_at = NULL
		WHERE tenant = ? AND agent = ? AND name = ?`
)

// getState reads slot name of ns in tx, or outside a transaction if tx
// is nil; it returns memory.ErrNotFound if there is no such slot.
func (d *DB) getState(ctx context.Context, tx *sql.Tx, ns memory.Namespace, name string) (stateRow, error) {
	var (
		r         = stateRow{state: memory.State{Name: name}}
		value     []byte
		updatedAt sql.NullInt64
		updatedBy sql.NullString
		holder    sql.NullString
		identity  sql.NullString
		expires   sql.NullInt64
	)
	var (
		st  *sql.Stmt
		err error
	)
	if tx != nil {
		st, err = d.stmts.inTx(ctx, tx, sqlGetState)
	} else {
		st, err = d.stmts.get(ctx, sqlGetState)
	}
	if err != nil {
		return stateRow{}, err
	}
	err = st.QueryRowContext(ctx, ns.Tenant, ns.Agent, name).
		Scan(&r.state.Version, &value, &updatedAt, &updatedBy, &r.epoch, &holder, &identity, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return stateRow{}, memory.ErrNotFound
	}
	if err != nil {
		return stateRow{}, err
	}
	if value != nil {
		r.state.Value = json.RawMessage(value)
	}
	if updatedAt.Valid {
		r.state.UpdatedAt = fromMillis(updatedAt.Int64)
	}
	r.state.UpdatedBy = updatedBy.String
	if holder.Valid {
		l := &memory.Lease{Epoch: r.epoch, ExpiresAt: fromMillis(expires.Int64)}
		if identity.Valid {
			if err := json.Unmarshal([]byte(identity.String), &l.HolderIdentity); err != nil {
				return stateRow{}, fmt.Errorf("decode lease holder: %w", err)
			}
		}
		l.Holder = l.HolderIdentity.Session
		r.holderKey = holder.String
		r.state.Lease = l
	}
	return r, nil
}

// GetWorkingState implements memory.Store.
func (d *DB) GetWorkingState(ctx context.Context, ns memory.Namespace, name string) (memory.State, error) {
	r, err := d.getState(ctx, nil, ns, name)
	if errors.Is(err, memory.ErrNotFound) {
		return memory.State{}, err
	}
	if err != nil {
		return memory.State{}, fmt.Errorf("sqlite: get working state: %w", err)
	}
	return r.state, nil
}

// AcquireStateLease implements memory.Store.
func (d *DB) AcquireStateLease(ctx context.Context, ns memory.Namespace, name string, req memory.LeaseRequest) (memory.Grant, error) {
	identity, err := json.Marshal(req.Holder)
	if err != nil {
		return memory.Grant{}, fmt.Errorf("sqlite: encode lease holder: %w", err)
	}
	now, expires := millis(req.Now), millis(req.Now.Add(req.TTL))
	var g memory.Grant
	err = d.tx(ctx, func(tx *sql.Tx) error {
		r, err := d.getState(ctx, tx, ns, name)
		if errors.Is(err, memory.ErrNotFound) {
			g = memory.Grant{Name: name, Epoch: 1, ExpiresAt: fromMillis(expires)}
			return d.execInTx(ctx, tx, sqlInsertLease, ns.Tenant, ns.Agent, name, memory.HolderKey(req.Holder), string(identity), expires)
		}
		if err != nil {
			return err
		}
		epoch, err := memory.NextLeaseEpoch(r.state.Lease, r.holderKey, r.epoch, req, fromMillis(now))
		if err != nil {
			return err
		}
		if err := d.execInTx(ctx, tx, sqlUpdateLease, epoch, memory.HolderKey(req.Holder), string(identity), expires, ns.Tenant, ns.Agent, name); err != nil {
			return err
		}
		g = memory.Grant{Name: name, Epoch: epoch, ExpiresAt: fromMillis(expires), Version: r.state.Version, Value: r.state.Value}
		return nil
	})
	if errors.Is(err, memory.ErrLeaseHeld) {
		return memory.Grant{}, err
	}
	if err != nil {
		return memory.Grant{}, fmt.Errorf("sqlite: acquire state lease: %w", err)
	}
	return g, nil
}

// PutWorkingState implements memory.Store. The lease check, the version
// check and the write are one IMMEDIATE transaction.
func (d *DB) PutWorkingState(ctx context.Context, ns memory.Namespace, name string, req memory.PutRequest) (memory.State, error) {
	now := millis(req.Now)
	var st memory.State
	err := d.tx(ctx, func(tx *sql.Tx) error {
		r, err := d.getState(ctx, tx, ns, name)
		if errors.Is(err, memory.ErrNotFound) {
			return memory.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if err := memory.CheckPut(r.state.Lease, r.holderKey, r.state.Version, req, fromMillis(now)); err != nil {
			return err
		}
		if err := d.execInTx(ctx, tx, sqlPutState, []byte(req.Value), now, req.Holder.Session, ns.Tenant, ns.Agent, name); err != nil {
			return err
		}
		st = r.state
		st.Version++
		st.Value = append(json.RawMessage(nil), req.Value...)
		st.UpdatedAt = fromMillis(now)
		st.UpdatedBy = req.Holder.Session
		return nil
	})
	if errors.Is(err, memory.ErrLeaseLost) || errors.Is(err, memory.ErrVersionConflict) {
		return memory.State{}, err
	}
	if err != nil {
		return memory.State{}, fmt.Errorf("sqlite: put working state: %w", err)
	}
	return st, nil
}

// ReleaseStateLease implements memory.Store.
func (d *DB) ReleaseStateLease(ctx context.Context, ns memory.Namespace, name string, holder apikey.Identity, epoch int64) error {
	err := d.tx(ctx, func(tx *sql.Tx) error {
		r, err := d.getState(ctx, tx, ns, name)
		if errors.Is(err, memory.ErrNotFound) {
			return memory.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if err := memory.CheckRelease(r.state.Lease, r.holderKey, holder, epoch); err != nil {
			return err
		}
		return d.execInTx(ctx, tx, sqlReleaseLease, ns.Tenant, ns.Agent, name)
	})
	if errors.Is(err, memory.ErrLeaseLost) {
		return err
	}
	if err != nil {
		return fmt.Errorf("sqlite: release state lease: %w", err)
	}
	return nil
}

// execInTx runs the prepared statement of query with args in tx.
func (d *DB) execInTx(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	st, err := d.stmts.inTx(ctx, tx, query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, args...)
	return err
}
