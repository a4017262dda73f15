package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

const stateSlot = "plan"

func leaseAcquire(s memory.Store, ns memory.Namespace, h apikey.Identity, at time.Time, takeOver int64) (memory.Grant, error) {
	return s.AcquireStateLease(context.Background(), ns, stateSlot, memory.LeaseRequest{Holder: h, TTL: time.Minute, Now: at, TakeOver: takeOver})
}

func mustLease(t *testing.T, s memory.Store, h apikey.Identity, at time.Time, takeOver int64) memory.Grant {
	t.Helper()
	g, err := leaseAcquire(s, memNSA, h, at, takeOver)
	if err != nil {
		t.Fatalf("AcquireStateLease(%s at %v) = %v", h.Session, at, err)
	}
	return g
}

func statePut(s memory.Store, h apikey.Identity, epoch, ifVersion int64, value string, at time.Time) (memory.State, error) {
	return s.PutWorkingState(context.Background(), memNSA, stateSlot, memory.PutRequest{
		Holder: h, Epoch: epoch, IfVersion: ifVersion, Value: json.RawMessage(value), Now: at,
	})
}

func isNullJSON(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

func testStateLifecycle(t *testing.T, s memory.Store) {
	ctx := context.Background()
	if _, err := s.GetWorkingState(ctx, memNSA, stateSlot); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("GetWorkingState(never used) = %v, want ErrNotFound", err)
	}
	at := memT0.Add(1500 * time.Microsecond) // kept to the millisecond
	g := mustLease(t, s, memHolder("pod-a"), at, 0)
	expires := memT0.Add(time.Minute + time.Millisecond)
	if g.Name != stateSlot || g.Epoch != 1 || !g.ExpiresAt.Equal(expires) || g.ExpiresAt.Location() != time.UTC || g.Version != 0 || !isNullJSON(g.Value) {
		t.Fatalf("AcquireStateLease() = %+v, want epoch 1 until %v UTC at version 0", g, expires)
	}
	st, err := s.GetWorkingState(ctx, memNSA, stateSlot)
	if err != nil {
		t.Fatalf("GetWorkingState(leased) = %v", err)
	}
	if st.Name != stateSlot || st.Version != 0 || !isNullJSON(st.Value) || !st.UpdatedAt.IsZero() || st.UpdatedBy != "" || st.Lease == nil {
		t.Fatalf("GetWorkingState(leased) = %+v, want version 0 with a lease", st)
	}
	if l := *st.Lease; l.Epoch != 1 || l.Holder != "pod-a" || !l.ExpiresAt.Equal(expires) || l.HolderIdentity != memHolder("pod-a") {
		t.Errorf("GetWorkingState(leased).Lease = %+v, want epoch 1 held by pod-a until %v with its identity", l, expires)
	}
	const value = `{ "b": [1, 2],  "a" : "x\u00e9" }` // byte for byte, never normalized
	written, err := statePut(s, memHolder("pod-a"), 1, 0, value, at)
	if err != nil {
		t.Fatalf("PutWorkingState() = %v", err)
	}
	want := memory.State{Name: stateSlot, Version: 1, Value: json.RawMessage(value), UpdatedAt: memT0.Add(time.Millisecond), UpdatedBy: "pod-a"}
	for _, c := range []struct {
		name string
		got  memory.State
	}{{"PutWorkingState", written}, {"GetWorkingState", mustGetState(t, s, memNSA)}} {
		if g := c.got; g.Name != want.Name || g.Version != want.Version || !bytes.Equal(g.Value, want.Value) ||
			!g.UpdatedAt.Equal(want.UpdatedAt) || g.UpdatedAt.Location() != time.UTC || g.UpdatedBy != want.UpdatedBy ||
			g.Lease == nil || g.Lease.Epoch != 1 {
			t.Errorf("%s() = %+v (value %s), want %+v (value %s) with the lease", c.name, g, g.Value, want, want.Value)
		}
	}
	// Renewal hands back the slot's content.
	g = mustLease(t, s, memHolder("pod-a"), at.Add(time.Second), 0)
	if g.Epoch != 1 || g.Version != 1 || !bytes.Equal(g.Value, []byte(value)) {
		t.Errorf("AcquireStateLease(renew) = %+v, want epoch 1 at version 1 with the value", g)
	}
	// Other namespaces do not see it.
	if _, err := s.GetWorkingState(ctx, memNSB, stateSlot); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("GetWorkingState(other namespace) = %v, want ErrNotFound", err)
	}
	if g, err := leaseAcquire(s, memNSB, memHolder("pod-b"), at, 0); err != nil || g.Epoch != 1 || g.Version != 0 {
		t.Errorf("AcquireStateLease(other namespace) = %+v, %v, want epoch 1 at version 0", g, err)
	}
	// A lease is recorded until released.
	if st := mustGetState(t, s, memNSA); st.Lease == nil || !st.Lease.ExpiresAt.Equal(at.Add(time.Second+time.Minute).Truncate(time.Millisecond)) {
		t.Errorf("GetWorkingState(renewed).Lease = %+v, want the renewed lease", st.Lease)
	}
	if err := s.ReleaseStateLease(ctx, memNSA, stateSlot, memHolder("pod-a"), 1); err != nil {
		t.Fatalf("ReleaseStateLease() = %v", err)
	}
	if st := mustGetState(t, s, memNSA); st.Lease != nil || st.Version != 1 || !bytes.Equal(st.Value, []byte(value)) {
		t.Errorf("GetWorkingState(released) = %+v, want version 1 with the value and no lease", st)
	}
}

func mustGetState(t *testing.T, s memory.Store, ns memory.Namespace) memory.State {
	t.Helper()
	st, err := s.GetWorkingState(context.Background(), ns, stateSlot)
	if err != nil {
		t.Fatalf("GetWorkingState() = %v", err)
	}
	return st
}

func testLeaseEpochs(t *testing.T, s memory.Store) {
	steps := []struct {
		name      string
		session   string
		at        time.Time
		takeOver  int64
		wantEpoch int64
		wantErr   error
	}{
		{"first lease", "pod-a", memT0, 0, 1, nil},
		{"renewal keeps epoch", "pod-a", memT0.Add(10 * time.Second), 0, 1, nil},
		{"held by another", "pod-b", memT0.Add(20 * time.Second), 0, 0, memory.ErrLeaseHeld},
		{"stale takeover epoch", "pod-b", memT0.Add(20 * time.Second), 7, 0, memory.ErrLeaseHeld},
		{"takeover", "pod-b", memT0.Add(20 * time.Second), 1, 2, nil},
		{"takeover of own lease is a renewal", "pod-b", memT0.Add(30 * time.Second), 2, 2, nil},
		{"lease expiring now is expired", "pod-a", memT0.Add(90 * time.Second), 0, 3, nil},
		{"own expired lease gets a new epoch", "pod-a", memT0.Add(200 * time.Second), 0, 4, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			g, err := leaseAcquire(s, memNSA, memHolder(st.session), st.at, st.takeOver)
			if !errors.Is(err, st.wantErr) {
				t.Fatalf("AcquireStateLease(%s) = %v, want %v", st.session, err, st.wantErr)
			}
			if err == nil && (g.Epoch != st.wantEpoch || !g.ExpiresAt.Equal(st.at.Add(time.Minute))) {
				t.Errorf("AcquireStateLease(%s) = epoch %d until %v, want %d until %v", st.session, g.Epoch, g.ExpiresAt, st.wantEpoch, st.at.Add(time.Minute))
			}
			var held *memory.LeaseHeldError
			if errors.As(err, &held) {
				if l := held.Lease; l.Holder != "pod-a" || l.HolderIdentity != memHolder("pod-a") || l.Epoch != 1 || !l.ExpiresAt.Equal(memT0.Add(70*time.Second)) {
					t.Errorf("AcquireStateLease(%s) held by %+v, want pod-a's epoch 1 until %v with its identity", st.session, l, memT0.Add(70*time.Second))
				}
			} else if err != nil {
				t.Errorf("AcquireStateLease(%s) = %T, want a *LeaseHeldError", st.session, err)
			}
		})
	}
}

// testLeaseHolderKey: holders are told apart by memory.HolderKey. A pod
// re-created under the same name (new UID) is a new holder: it gets a new
// epoch, and the old incarnation can neither write nor release. An
// identity without a pod UID is its session.
func testLeaseHolderKey(t *testing.T, s memory.Store) {
	ctx := context.Background()
	old := memHolder("pod-a")
	reborn := old
	reborn.PodUID = "uid-pod-a-2"
	g1 := mustLease(t, s, old, memT0, 0)
	if _, err := leaseAcquire(s, memNSA, reborn, memT0, 0); !errors.Is(err, memory.ErrLeaseHeld) {
		t.Errorf("same pod name, new UID, while the old lease is live = %v, want ErrLeaseHeld", err)
	}
	// The old incarnation is gone (its pod was deleted): takeover.
	g2 := mustLease(t, s, reborn, memT0, g1.Epoch)
	if g2.Epoch != g1.Epoch+1 {
		t.Fatalf("re-created pod got epoch %d, want %d", g2.Epoch, g1.Epoch+1)
	}
	if g := mustLease(t, s, reborn, memT0, 0); g.Epoch != g2.Epoch {
		t.Errorf("renewal by the same incarnation = epoch %d, want %d", g.Epoch, g2.Epoch)
	}
	for _, epoch := range []int64{g1.Epoch, g2.Epoch} {
		if _, err := statePut(s, old, epoch, 0, `1`, memT0); !errors.Is(err, memory.ErrLeaseLost) {
			t.Errorf("old incarnation writes with epoch %d = %v, want ErrLeaseLost", epoch, err)
		}
	}
	if err := s.ReleaseStateLease(ctx, memNSA, stateSlot, old, g2.Epoch); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("old incarnation releases = %v, want ErrLeaseLost", err)
	}
	if _, err := statePut(s, reborn, g2.Epoch, 0, `1`, memT0); err != nil {
		t.Errorf("new incarnation writes = %v", err)
	}
	// Static identities: the session alone.
	static := apikey.Identity{Tenant: memNSA.Tenant, Agent: memNSA.Agent, Session: "laptop", Method: "static"}
	withUID := static
	withUID.PodUID = "uid-laptop"
	at := memT0.Add(time.Hour)
	g := mustLease(t, s, static, at, 0)
	if r := mustLease(t, s, static, at.Add(time.Second), 0); r.Epoch != g.Epoch {
		t.Errorf("static renewal = epoch %d, want %d", r.Epoch, g.Epoch)
	}
	if _, err := leaseAcquire(s, memNSA, withUID, at, 0); !errors.Is(err, memory.ErrLeaseHeld) {
		t.Errorf("same session with a pod UID = %v, want ErrLeaseHeld", err)
	}
	if _, err := statePut(s, static, g.Epoch, memory.AnyVersion, `2`, at); err != nil {
		t.Errorf("static memHolder writes = %v", err)
	}
}

func testReleaseLease(t *testing.T, s memory.Store) {
	ctx := context.Background()
	release := func(h apikey.Identity, epoch int64) error {
		return s.ReleaseStateLease(ctx, memNSA, stateSlot, h, epoch)
	}
	if err := release(memHolder("pod-a"), 1); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("ReleaseStateLease(never leased) = %v, want ErrLeaseLost", err)
	}
	g := mustLease(t, s, memHolder("pod-a"), memT0, 0)
	tests := []struct {
		name  string
		h     apikey.Identity
		epoch int64
		want  error
	}{
		{"not the holder", memHolder("pod-b"), g.Epoch, memory.ErrLeaseLost},
		{"wrong epoch", memHolder("pod-a"), g.Epoch + 1, memory.ErrLeaseLost},
		{"other namespace's holder", apikey.Identity{Tenant: memNSB.Tenant, Agent: memNSB.Agent, Session: "pod-a", PodUID: "uid-pod-a-b"}, g.Epoch, memory.ErrLeaseLost},
		{"holder, though expired", memHolder("pod-a"), g.Epoch, nil},
		{"again", memHolder("pod-a"), g.Epoch, memory.ErrLeaseLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := release(tt.h, tt.epoch); !errors.Is(err, tt.want) {
				t.Errorf("ReleaseStateLease(%s, %d) = %v, want %v", tt.h.Session, tt.epoch, err, tt.want)
			}
		})
	}
	if _, err := statePut(s, memHolder("pod-a"), g.Epoch, memory.AnyVersion, `1`, memT0); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("PutWorkingState(released) = %v, want ErrLeaseLost", err)
	}
	// The epoch is kept, so the next holder, even the same one, gets epoch+1.
	if g2 := mustLease(t, s, memHolder("pod-a"), memT0, 0); g2.Epoch != g.Epoch+1 {
		t.Errorf("AcquireStateLease(after release) = epoch %d, want %d", g2.Epoch, g.Epoch+1)
	}
}

func testPutFencing(t *testing.T, s memory.Store) {
	if _, err := statePut(s, memHolder("pod-a"), 1, 0, `{}`, memT0); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("PutWorkingState(no stateSlot) = %v, want ErrLeaseLost", err)
	}
	e1 := mustLease(t, s, memHolder("pod-a"), memT0, 0).Epoch
	steps := []struct {
		name      string
		session   string
		epoch     int64
		ifVersion int64
		at        time.Time
		want      error
	}{
		{"create at version 0", "pod-a", e1, 0, memT0, nil},
		{"stale version", "pod-a", e1, 0, memT0, memory.ErrVersionConflict},
		{"future version", "pod-a", e1, 5, memT0, memory.ErrVersionConflict},
		{"wrong epoch", "pod-a", e1 + 1, 1, memT0, memory.ErrLeaseLost},
		{"not the holder", "pod-b", e1, 1, memT0, memory.ErrLeaseLost},
		{"lease checked before version", "pod-b", e1, 9, memT0, memory.ErrLeaseLost},
		{"any version", "pod-a", e1, memory.AnyVersion, memT0, nil},
		{"expired", "pod-a", e1, 2, memT0.Add(time.Minute), memory.ErrLeaseLost},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if _, err := statePut(s, memHolder(st.session), st.epoch, st.ifVersion, `{"step":1}`, st.at); !errors.Is(err, st.want) {
				t.Errorf("PutWorkingState(%s, epoch %d, version %d) = %v, want %v", st.session, st.epoch, st.ifVersion, err, st.want)
			}
		})
	}
	var vc *memory.VersionConflictError
	if _, err := statePut(s, memHolder("pod-a"), e1, 0, `1`, memT0); !errors.As(err, &vc) || vc.Current != 2 {
		t.Errorf("PutWorkingState(version 0) = %v, want VersionConflictError{Current: 2}", err)
	}
	st := mustGetState(t, s, memNSA)
	if st.Version != 2 || string(st.Value) != `{"step":1}` || st.UpdatedBy != "pod-a" {
		t.Errorf("GetWorkingState() = %+v, want version 2 by pod-a", st)
	}
}
