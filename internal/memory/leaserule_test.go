package memory

import (
	"errors"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

func TestLeaseRules(t *testing.T) {
	now := time.UnixMilli(1_000_000).UTC()
	a := apikey.Identity{Tenant: "t", Agent: "x", Session: "pod-a", PodUID: "uid-a"}
	b := apikey.Identity{Tenant: "t", Agent: "x", Session: "pod-b", PodUID: "uid-b"}
	live := &Lease{Epoch: 4, ExpiresAt: now.Add(time.Millisecond)}
	expiring := &Lease{Epoch: 4, ExpiresAt: now} // expires at now: expired
	for _, c := range []struct {
		name string
		l    *Lease
		req  LeaseRequest
		want int64
		held bool
	}{
		{"renewal by the holder", live, LeaseRequest{Holder: a}, 4, false},
		{"held by another", live, LeaseRequest{Holder: b}, 0, true},
		{"takeover of that epoch", live, LeaseRequest{Holder: b, TakeOver: 4}, 5, false},
		{"takeover of another epoch", live, LeaseRequest{Holder: b, TakeOver: 3}, 0, true},
		{"expired at now", expiring, LeaseRequest{Holder: b}, 5, false},
		{"released", nil, LeaseRequest{Holder: b}, 5, false},
	} {
		got, err := NextLeaseEpoch(c.l, HolderKey(a), 4, c.req, now)
		var he *LeaseHeldError
		if c.held != errors.As(err, &he) || (!c.held && (err != nil || got != c.want)) {
			t.Errorf("%s: %d, %v; want %d held=%v", c.name, got, err, c.want, c.held)
		}
	}
	put := PutRequest{Holder: a, Epoch: 4, IfVersion: 7}
	if err := CheckPut(live, HolderKey(a), 7, put, now); err != nil {
		t.Errorf("put by the holder: %v", err)
	}
	if err := CheckPut(live, HolderKey(a), 8, put, now); !errors.Is(err, ErrVersionConflict) {
		t.Errorf("put at another version: %v", err)
	}
	for name, l := range map[string]*Lease{"expired": expiring, "none": nil, "other epoch": {Epoch: 5, ExpiresAt: live.ExpiresAt}} {
		if err := CheckPut(l, HolderKey(a), 7, put, now); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("put with lease %s: %v, want ErrLeaseLost", name, err)
		}
	}
	if err := CheckPut(live, HolderKey(b), 7, put, now); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("put by a non-holder: %v", err)
	}
	if err := CheckRelease(expiring, HolderKey(a), a, 4); err != nil {
		t.Errorf("release of an expired lease by its holder: %v", err)
	}
	if err := CheckRelease(live, HolderKey(a), b, 4); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("release by another: %v", err)
	}
}
