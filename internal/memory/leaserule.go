package memory

import (
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// The rules below are what every [Store] applies, inside the transaction
// that reads a slot and writes it, to decide about its lease: written once
// so that the stores cannot disagree on who holds a lease. l is the slot's
// stored lease (nil if none is recorded), holderKey its stored
// [HolderKey], and now the current time at the store's resolution
// (milliseconds).

// LeaseLive reports whether l is unexpired at now (a lease expiring at
// now is expired).
func LeaseLive(l *Lease, now time.Time) bool { return l != nil && l.ExpiresAt.After(now) }

// NextLeaseEpoch is the rule of [Store.AcquireStateLease] for a slot that
// exists: lastEpoch is the slot's last epoch (kept after a release). The
// holder of the live lease renews it (same epoch); a slot whose lease is
// absent or expired, or whose live lease has epoch req.TakeOver, is
// granted with lastEpoch+1; otherwise the result is a [*LeaseHeldError].
func NextLeaseEpoch(l *Lease, holderKey string, lastEpoch int64, req LeaseRequest, now time.Time) (int64, error) {
	live := LeaseLive(l, now)
	switch {
	case live && holderKey == HolderKey(req.Holder):
		return lastEpoch, nil // renewal
	case !live:
		return lastEpoch + 1, nil
	case req.TakeOver != 0 && req.TakeOver == l.Epoch:
		return lastEpoch + 1, nil
	}
	return 0, &LeaseHeldError{Lease: *l}
}

// CheckPut is the check of [Store.PutWorkingState] before it writes a
// slot at version: [ErrLeaseLost] unless req.Holder holds its unexpired
// lease with epoch req.Epoch, then a [*VersionConflictError] unless
// version is req.IfVersion (or that is [AnyVersion]).
func CheckPut(l *Lease, holderKey string, version int64, req PutRequest, now time.Time) error {
	if !LeaseLive(l, now) || holderKey != HolderKey(req.Holder) || l.Epoch != req.Epoch {
		return ErrLeaseLost
	}
	if req.IfVersion != AnyVersion && req.IfVersion != version {
		return &VersionConflictError{Current: version}
	}
	return nil
}

// CheckRelease is the check of [Store.ReleaseStateLease]: [ErrLeaseLost]
// unless holder holds the slot's lease with epoch (expired or not).
func CheckRelease(l *Lease, holderKey string, holder apikey.Identity, epoch int64) error {
	if l == nil || holderKey != HolderKey(holder) || l.Epoch != epoch {
		return ErrLeaseLost
	}
	return nil
}
