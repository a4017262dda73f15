package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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

// getState reads slot name of ns, or returns memory.ErrNotFound. In a
// write transaction it is called after lockNamespace, so it reads the
// latest committed row.
func getState(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, ns memory.Namespace, name string) (stateRow, error) {
	var (
		r         = stateRow{state: memory.State{Name: name}}
		value     []byte
		updatedAt *time.Time
		updatedBy *string
		holder    *string
		identity  []byte
		expires   *time.Time
	)
	err := q.QueryRow(ctx,
		`SELECT version, state, updated_at, updated_by, lease_epoch, lease_holder, lease_identity, lease_expires_at
		 FROM memory_state WHERE tenant = $1 AND agent = $2 AND name = $3`,
		ns.Tenant, ns.Agent, name).
		Scan(&r.state.Version, &value, &updatedAt, &updatedBy, &r.epoch, &holder, &identity, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return stateRow{}, memory.ErrNotFound
	}
	if err != nil {
		return stateRow{}, err
	}
	if value != nil {
		r.state.Value = json.RawMessage(value)
	}
	if updatedAt != nil {
		r.state.UpdatedAt = updatedAt.UTC()
	}
	if updatedBy != nil {
		r.state.UpdatedBy = *updatedBy
	}
	if holder != nil && expires != nil {
		l := &memory.Lease{Epoch: r.epoch, ExpiresAt: expires.UTC()}
		if identity != nil {
			if err := json.Unmarshal(identity, &l.HolderIdentity); err != nil {
				return stateRow{}, fmt.Errorf("decode lease holder: %w", err)
			}
		}
		l.Holder = l.HolderIdentity.Session
		r.holderKey = *holder
		r.state.Lease = l
	}
	return r, nil
}

// GetWorkingState implements memory.Store.
func (d *DB) GetWorkingState(ctx context.Context, ns memory.Namespace, name string) (memory.State, error) {
	r, err := getState(ctx, d.pool, ns, name)
	if errors.Is(err, memory.ErrNotFound) {
		return memory.State{}, err
	}
	if err != nil {
		return memory.State{}, fmt.Errorf("postgres: get working state: %w", err)
	}
	return r.state, nil
}

// AcquireStateLease implements memory.Store. Under the namespace's lock
// it reads the slot, decides, and writes the lease in one transaction.
func (d *DB) AcquireStateLease(ctx context.Context, ns memory.Namespace, name string, req memory.LeaseRequest) (memory.Grant, error) {
	identityJSON, err := json.Marshal(req.Holder)
	if err != nil {
		return memory.Grant{}, fmt.Errorf("postgres: encode lease holder: %w", err)
	}
	// Sent as text, as tags are (memoryInsertArgs): under the exec mode a
	// []byte would go over as bytea text, which json refuses.
	identity := string(identityJSON)
	now, expires := millisUTC(req.Now), millisUTC(req.Now.Add(req.TTL))
	key := memory.HolderKey(req.Holder)
	var g memory.Grant
	err = d.tx(ctx, func(tx pgx.Tx) error {
		if err := lockNamespace(ctx, tx, ns); err != nil {
			return err
		}
		r, err := getState(ctx, tx, ns, name)
		if errors.Is(err, memory.ErrNotFound) {
			g = memory.Grant{Name: name, Epoch: 1, ExpiresAt: expires}
			_, err := tx.Exec(ctx,
				`INSERT INTO memory_state (tenant, agent, name, version, lease_epoch, lease_holder, lease_identity, lease_expires_at)
				 VALUES ($1, $2, $3, 0, 1, $4, $5, $6)`,
				ns.Tenant, ns.Agent, name, key, identity, expires)
			return err
		}
		if err != nil {
			return err
		}
		epoch, err := memory.NextLeaseEpoch(r.state.Lease, r.holderKey, r.epoch, req, now)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx,
			`UPDATE memory_state SET lease_epoch = $1, lease_holder = $2, lease_identity = $3, lease_expires_at = $4
			 WHERE tenant = $5 AND agent = $6 AND name = $7`,
			epoch, key, identity, expires, ns.Tenant, ns.Agent, name); err != nil {
			return err
		}
		g = memory.Grant{Name: name, Epoch: epoch, ExpiresAt: expires, Version: r.state.Version, Value: r.state.Value}
		return nil
	})
	if errors.Is(err, memory.ErrLeaseHeld) {
		return memory.Grant{}, err
	}
	if err != nil {
		return memory.Grant{}, fmt.Errorf("postgres: acquire state lease: %w", err)
	}
	return g, nil
}

// PutWorkingState implements memory.Store. The lease check, the version
// check and the write are one transaction under the namespace's lock, so
// a holder fenced off by a takeover that committed first cannot write.
func (d *DB) PutWorkingState(ctx context.Context, ns memory.Namespace, name string, req memory.PutRequest) (memory.State, error) {
	now := millisUTC(req.Now)
	var st memory.State
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if err := lockNamespace(ctx, tx, ns); err != nil {
			return err
		}
		r, err := getState(ctx, tx, ns, name)
		if errors.Is(err, memory.ErrNotFound) {
			return memory.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if err := memory.CheckPut(r.state.Lease, r.holderKey, r.state.Version, req, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx,
			`UPDATE memory_state SET version = version + 1, state = $1, updated_at = $2, updated_by = $3
			 WHERE tenant = $4 AND agent = $5 AND name = $6`,
			[]byte(req.Value), now, req.Holder.Session, ns.Tenant, ns.Agent, name); err != nil {
			return err
		}
		st = r.state
		st.Version++
		st.Value = append(json.RawMessage(nil), req.Value...)
		st.UpdatedAt = now
		st.UpdatedBy = req.Holder.Session
		return nil
	})
	if errors.Is(err, memory.ErrLeaseLost) || errors.Is(err, memory.ErrVersionConflict) {
		return memory.State{}, err
	}
	if err != nil {
		return memory.State{}, fmt.Errorf("postgres: put working state: %w", err)
	}
	return st, nil
}

// ReleaseStateLease implements memory.Store.
func (d *DB) ReleaseStateLease(ctx context.Context, ns memory.Namespace, name string, holder apikey.Identity, epoch int64) error {
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if err := lockNamespace(ctx, tx, ns); err != nil {
			return err
		}
		r, err := getState(ctx, tx, ns, name)
		if errors.Is(err, memory.ErrNotFound) {
			return memory.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if err := memory.CheckRelease(r.state.Lease, r.holderKey, holder, epoch); err != nil {
			return err
		}
		_, err = tx.Exec(ctx,
			`UPDATE memory_state SET lease_holder = NULL, lease_identity = NULL, lease_expires_at = NULL
			 WHERE tenant = $1 AND agent = $2 AND name = $3`,
			ns.Tenant, ns.Agent, name)
		return err
	})
	if errors.Is(err, memory.ErrLeaseLost) {
		return err
	}
	if err != nil {
		return fmt.Errorf("postgres: release state lease: %w", err)
	}
	return nil
}
