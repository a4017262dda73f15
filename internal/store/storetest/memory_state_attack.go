package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

// stateSlotVariant is a namespace and slot name that must be a slot of
// its own.
type stateSlotVariant struct {
	ns   memory.Namespace
	name string
}

// stateSlotVariants differ from memNSA's slot "plan" only in letter case,
// Unicode normalization or look-alikes, a separator moved between tenant
// and agent, or trailing space; a store that folds or normalizes any of
// them would let one claim resume another's state or lease.
var stateSlotVariants = []stateSlotVariant{
	{memNSA, "plan"},
	{memNSA, "Plan"},
	{memNSA, "PLAN"},
	{memory.Namespace{Tenant: "Agents", Agent: "run-1"}, "plan"},
	{memory.Namespace{Tenant: "agents", Agent: "RUN-1"}, "plan"},
	{memory.Namespace{Tenant: "agents", Agent: "run-1 "}, "plan"},
	{memory.Namespace{Tenant: "agents ", Agent: "run-1"}, "plan"},
	{memory.Namespace{Tenant: "agents", Agent: "run\u20101"}, "plan"},  // hyphen look-alike
	{memory.Namespace{Tenant: "agents", Agent: "run-\uff11"}, "plan"},  // fullwidth 1
	{memory.Namespace{Tenant: "agents", Agent: "caf\u00e9"}, "plan"},   // NFC
	{memory.Namespace{Tenant: "agents", Agent: "cafe\u0301"}, "plan"},  // NFD of the same
	{memory.Namespace{Tenant: "agents", Agent: "\u212aelvin"}, "plan"}, // Kelvin sign
	{memory.Namespace{Tenant: "agents", Agent: "Kelvin"}, "plan"},
	{memory.Namespace{Tenant: "agents", Agent: "kelvin"}, "plan"},
	{memory.Namespace{Tenant: "agents/run-1", Agent: ""}, "plan"},
	{memory.Namespace{Tenant: "agents", Agent: "/run-1"}, "plan"},
	{memory.Namespace{Tenant: "agents/", Agent: "run-1"}, "plan"},
	{memNSJoined, "plan"},
}

// testAttack10StateSlotVariants: every variant's slot is its own: each
// first lease is epoch 1 for its own holder, each write lands in its own
// slot only, and a holder of one cannot write or release another.
func testAttack10StateSlotVariants(t *testing.T, s memory.Store) {
	ctx := context.Background()
	holder := func(i int, v stateSlotVariant) apikey.Identity {
		return apikey.Identity{Tenant: v.ns.Tenant, Agent: v.ns.Agent, Session: fmt.Sprintf("pod-%d", i), Method: "kubernetes", PodUID: fmt.Sprintf("uid-%d", i)}
	}
	for i, v := range stateSlotVariants {
		g, err := s.AcquireStateLease(ctx, v.ns, v.name, memory.LeaseRequest{Holder: holder(i, v), TTL: time.Minute, Now: memT0})
		if err != nil || g.Epoch != 1 || g.Version != 0 {
			t.Fatalf("AcquireStateLease(%q %q %q) = %+v, %v; want epoch 1 of a new slot", v.ns.Tenant, v.ns.Agent, v.name, g, err)
		}
		if _, err := s.PutWorkingState(ctx, v.ns, v.name, memory.PutRequest{
			Holder: holder(i, v), Epoch: 1, IfVersion: 0, Value: json.RawMessage(fmt.Sprint(i)), Now: memT0,
		}); err != nil {
			t.Fatalf("PutWorkingState(%q %q %q) = %v", v.ns.Tenant, v.ns.Agent, v.name, err)
		}
	}
	for i, v := range stateSlotVariants {
		st, err := s.GetWorkingState(ctx, v.ns, v.name)
		if err != nil || st.Version != 1 || string(st.Value) != fmt.Sprint(i) || st.Lease == nil || st.Lease.Holder != fmt.Sprintf("pod-%d", i) {
			t.Errorf("GetWorkingState(%q %q %q) = %+v (value %s), %v; want version 1, value %d, held by pod-%d", v.ns.Tenant, v.ns.Agent, v.name, st, st.Value, err, i, i)
		}
		// The next variant's holder, naming this slot with its own epoch 1.
		j := (i + 1) % len(stateSlotVariants)
		other := holder(j, stateSlotVariants[j])
		other.Tenant, other.Agent = v.ns.Tenant, v.ns.Agent
		if _, err := s.PutWorkingState(ctx, v.ns, v.name, memory.PutRequest{Holder: other, Epoch: 1, IfVersion: memory.AnyVersion, Value: json.RawMessage(`"x"`), Now: memT0}); !errors.Is(err, memory.ErrLeaseLost) {
			t.Errorf("PutWorkingState(%q %q %q by pod-%d) = %v, want ErrLeaseLost", v.ns.Tenant, v.ns.Agent, v.name, j, err)
		}
		if err := s.ReleaseStateLease(ctx, v.ns, v.name, other, 1); !errors.Is(err, memory.ErrLeaseLost) {
			t.Errorf("ReleaseStateLease(%q %q %q by pod-%d) = %v, want ErrLeaseLost", v.ns.Tenant, v.ns.Agent, v.name, j, err)
		}
	}
}
