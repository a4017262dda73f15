package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

func openTestDB(tb testing.TB) *DB {
	tb.Helper()
	db, err := Open(context.Background(), tb.TempDir())
	if err != nil {
		tb.Fatalf("Open() = %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

var (
	nsA = memory.Namespace{Tenant: "agents", Agent: "run-1"}
	nsB = memory.Namespace{Tenant: "agents", Agent: "run-2"}
	t0  = time.Date(2026, 10, 12, 9, 0, 0, 0, time.UTC)
)

func mem(kind, key, text string, at time.Time) memory.Memory {
	return memory.Memory{Kind: kind, Key: key, Text: text, Session: "pod-1", CreatedAt: at}
}

func TestMemoryIDRoundTrip(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"0000000000000001", true},
		{"7fffffffffffffff", true},
		{"8000000000000000", false},
		{"0000000000000000", false},
		{"000000000000000G", false},
		{"00000000000000AB", false}, // uppercase is not the canonical form
		{"1", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id, ok := parseMemoryID(tt.in)
			if ok != tt.ok {
				t.Fatalf("parseMemoryID(%q) ok = %v, want %v", tt.in, ok, tt.ok)
			}
			if ok && formatMemoryID(id) != tt.in {
				t.Errorf("formatMemoryID(%d) = %q, want %q", id, formatMemoryID(id), tt.in)
			}
		})
	}
}

func TestRememberMemoryStatuses(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	first, err := db.RememberMemory(ctx, nsA, mem("preference", "color", "blue", t0))
	if err != nil || first.Status != memory.StatusCreated {
		t.Fatalf("RememberMemory(blue) = %+v, %v, want created", first, err)
	}
	steps := []struct {
		name       string
		ns         memory.Namespace
		m          memory.Memory
		want       memory.Status
		supersedes string
	}{
		{"same again is unchanged", nsA, mem("preference", "color", "blue", t0.Add(time.Second)), memory.StatusUnchanged, ""},
		{"other namespace is separate", nsB, mem("preference", "color", "blue", t0), memory.StatusCreated, ""},
		{"other kind is separate", nsA, mem("fact", "color", "blue", t0), memory.StatusCreated, ""},
		{"new text supersedes", nsA, mem("preference", "color", "red", t0.Add(2*time.Second)), memory.StatusSuperseded, first.ID},
		{"keyless duplicate", nsA, mem("fact", "", "sky is blue", t0), memory.StatusCreated, ""},
		{"keyless duplicate again", nsA, mem("fact", "", "sky is blue", t0), memory.StatusUnchanged, ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got, err := db.RememberMemory(ctx, s.ns, s.m)
			if err != nil {
				t.Fatalf("RememberMemory(%q) = %v", s.m.Text, err)
			}
			if got.Status != s.want || got.Supersedes != s.supersedes {
				t.Errorf("RememberMemory(%q) = %s supersedes %q, want %s supersedes %q", s.m.Text, got.Status, got.Supersedes, s.want, s.supersedes)
			}
		})
	}
	// Going back to blue supersedes red with a new memory; history has all three.
	back, err := db.RememberMemory(ctx, nsA, mem("preference", "color", "blue", t0.Add(3*time.Second)))
	if err != nil || back.Status != memory.StatusSuperseded || back.ID == first.ID {
		t.Fatalf("RememberMemory(blue again) = %+v, %v, want superseded with a new ID", back, err)
	}
	all, err := db.RecallMemories(ctx, nsA, memory.Query{Kind: "preference", Limit: 10, History: true})
	if err != nil || len(all) != 3 {
		t.Fatalf("RecallMemories(history) = %d memories, %v, want 3", len(all), err)
	}
	active, err := db.RecallMemories(ctx, nsA, memory.Query{Kind: "preference", Limit: 10})
	if err != nil || len(active) != 1 || active[0].ID != back.ID {
		t.Fatalf("RecallMemories(active) = %+v, %v, want only %s", active, err, back.ID)
	}
	if all[2].ID != first.ID || all[2].SupersededBy == "" || all[2].SupersededAt.IsZero() {
		t.Errorf("oldest memory = %+v, want %s superseded", all[2], first.ID)
	}
}

func TestForgetMemory(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	r, err := db.RememberMemory(ctx, nsA, mem("fact", "", "forget me", t0))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ns   memory.Namespace
		id   string
		want error
	}{
		{"other namespace", nsB, r.ID, memory.ErrNotFound},
		{"malformed", nsA, "not-an-id", memory.ErrNotFound},
		{"owner", nsA, r.ID, nil},
		{"again", nsA, r.ID, memory.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.ForgetMemory(ctx, tt.ns, tt.id); !errors.Is(err, tt.want) {
				t.Errorf("ForgetMemory(%v, %q) = %v, want %v", tt.ns, tt.id, err, tt.want)
			}
		})
	}
	got, err := db.RecallMemories(ctx, nsA, memory.Query{Text: "forget", Limit: 10})
	if err != nil || len(got) != 0 {
		t.Errorf("RecallMemories(forget) = %v, %v, want none (index entry deleted)", got, err)
	}
}

func holder(session string) apikey.Identity {
	return apikey.Identity{Tenant: nsA.Tenant, Agent: nsA.Agent, Session: session, PodUID: "uid-" + session}
}

func TestStateLeaseEpochs(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	ttl := time.Minute
	steps := []struct {
		name      string
		session   string
		at        time.Time
		takeOver  int64
		wantEpoch int64
		wantErr   error
	}{
		{"first lease", "pod-a", t0, 0, 1, nil},
		{"renewal keeps epoch", "pod-a", t0.Add(10 * time.Second), 0, 1, nil},
		{"held by another", "pod-b", t0.Add(20 * time.Second), 0, 0, memory.ErrLeaseHeld},
		{"stale takeover epoch", "pod-b", t0.Add(20 * time.Second), 7, 0, memory.ErrLeaseHeld},
		{"takeover", "pod-b", t0.Add(20 * time.Second), 1, 2, nil},
		{"expired lease goes to next", "pod-a", t0.Add(90 * time.Second), 0, 3, nil},
		{"own expired lease gets new epoch", "pod-a", t0.Add(200 * time.Second), 0, 4, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			g, err := db.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: holder(s.session), TTL: ttl, Now: s.at, TakeOver: s.takeOver})
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("AcquireStateLease(%s) = %v, want %v", s.session, err, s.wantErr)
			}
			if err == nil && (g.Epoch != s.wantEpoch || !g.ExpiresAt.Equal(s.at.Add(ttl))) {
				t.Errorf("AcquireStateLease(%s) = epoch %d expires %v, want %d, %v", s.session, g.Epoch, g.ExpiresAt, s.wantEpoch, s.at.Add(ttl))
			}
			var held *memory.LeaseHeldError
			if errors.As(err, &held) && (held.Lease.Holder != "pod-a" || held.Lease.HolderIdentity.PodUID != "uid-pod-a") {
				t.Errorf("AcquireStateLease(%s) held by %+v, want pod-a with its identity", s.session, held.Lease)
			}
		})
	}
	// Release keeps the epoch: the next holder gets 5.
	at := t0.Add(210 * time.Second)
	if err := db.ReleaseStateLease(ctx, nsA, "plan", holder("pod-b"), 4); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("ReleaseStateLease(pod-b, 4) = %v, want ErrLeaseLost", err)
	}
	if err := db.ReleaseStateLease(ctx, nsA, "plan", holder("pod-a"), 3); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("ReleaseStateLease(pod-a, 3) = %v, want ErrLeaseLost", err)
	}
	if err := db.ReleaseStateLease(ctx, nsA, "plan", holder("pod-a"), 4); err != nil {
		t.Fatalf("ReleaseStateLease(pod-a, 4) = %v", err)
	}
	g, err := db.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: holder("pod-b"), TTL: ttl, Now: at})
	if err != nil || g.Epoch != 5 {
		t.Errorf("AcquireStateLease after release = %d, %v, want epoch 5", g.Epoch, err)
	}
}

func TestPutWorkingStateFencing(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	lease := func(session string, at time.Time) int64 {
		t.Helper()
		g, err := db.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: holder(session), TTL: time.Minute, Now: at})
		if err != nil {
			t.Fatalf("AcquireStateLease(%s) = %v", session, err)
		}
		return g.Epoch
	}
	if err := putErr(db, "pod-a", 1, 0, `{}`, t0); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("PutWorkingState(no slot) = %v, want ErrLeaseLost", err)
	}
	e1 := lease("pod-a", t0)
	steps := []struct {
		name      string
		session   string
		epoch     int64
		ifVersion int64
		at        time.Time
		want      error
	}{
		{"create at version 0", "pod-a", e1, 0, t0, nil},
		{"stale version", "pod-a", e1, 0, t0, memory.ErrVersionConflict},
		{"wrong epoch", "pod-a", e1 + 1, 1, t0, memory.ErrLeaseLost},
		{"not the holder", "pod-b", e1, 1, t0, memory.ErrLeaseLost},
		{"lease checked before version", "pod-b", e1, 9, t0, memory.ErrLeaseLost},
		{"any version", "pod-a", e1, memory.AnyVersion, t0, nil},
		{"expired", "pod-a", e1, 2, t0.Add(time.Minute), memory.ErrLeaseLost},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := putErr(db, s.session, s.epoch, s.ifVersion, `{"step":1}`, s.at); !errors.Is(err, s.want) {
				t.Errorf("PutWorkingState(%s, epoch %d, version %d) = %v, want %v", s.session, s.epoch, s.ifVersion, err, s.want)
			}
		})
	}
	var vc *memory.VersionConflictError
	if err := putErr(db, "pod-a", e1, 0, `1`, t0); !errors.As(err, &vc) || vc.Current != 2 {
		t.Errorf("PutWorkingState(version 0) = %v, want VersionConflictError{Current: 2}", err)
	}
	st, err := db.GetWorkingState(ctx, nsA, "plan")
	if err != nil || st.Version != 2 || string(st.Value) != `{"step":1}` || st.UpdatedBy != "pod-a" {
		t.Errorf("GetWorkingState() = %+v, %v, want version 2 by pod-a", st, err)
	}
}

func putErr(db *DB, session string, epoch, ifVersion int64, value string, at time.Time) error {
	_, err := db.PutWorkingState(context.Background(), nsA, "plan", memory.PutRequest{
		Holder: holder(session), Epoch: epoch, IfVersion: ifVersion, Value: json.RawMessage(value), Now: at,
	})
	return err
}

func TestPutWorkingStateRace(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	g, err := db.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: holder("pod-a"), TTL: time.Minute, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = putErr(db, "pod-a", g.Epoch, 0, fmt.Sprintf(`{"writer":%d}`, i), t0) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, memory.ErrVersionConflict):
			t.Errorf("PutWorkingState(writer %d) = %v, want nil or ErrVersionConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("PutWorkingState winners = %d, want 1", won)
	}
}

func TestAcquireStateLeaseRace(t *testing.T) {
	db := openTestDB(t)
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = db.AcquireStateLease(context.Background(), nsA, "plan",
				memory.LeaseRequest{Holder: holder(fmt.Sprintf("pod-%d", i)), TTL: time.Minute, Now: t0})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, memory.ErrLeaseHeld):
			t.Errorf("AcquireStateLease(pod-%d) = %v, want nil or ErrLeaseHeld", i, err)
		}
	}
	if won != 1 {
		t.Errorf("AcquireStateLease winners = %d, want 1", won)
	}
}

var fullScan = regexp.MustCompile(`^SCAN (m|x|memories|memory_state)( |$)`)

// TestMemoryQueryPlans checks that no memory statement scans a whole
// table: with 100k memories a scan costs tens of milliseconds.
func TestMemoryQueryPlans(t *testing.T) {
	db := openTestDB(t)
	hash := contentHash("fact", "", "x")
	type stmt struct {
		name string
		sql  string
		args []any
		want string // in the plan
	}
	stmts := []stmt{
		{"find active by hash", sqlFindActiveByHash, []any{"t", "a", hash}, "memories_active_hash"},
		{"supersede", sqlSupersede, []any{1, 1, "t", "a", "fact", "k"}, "memories_active_key"},
		{"forget", `DELETE FROM memories WHERE id = ? AND tenant = ? AND agent = ?`, []any{1, "t", "a"}, "INTEGER PRIMARY KEY"},
		{"state", `SELECT version FROM memory_state WHERE tenant = ? AND agent = ? AND name = ?`, []any{"t", "a", "n"}, "PRIMARY KEY"},
	}
	for _, tt := range []struct {
		q    memory.Query
		want string
	}{
		{memory.Query{Limit: 10}, "memories_newest"},
		{memory.Query{Kind: "fact", Limit: 10, History: true}, "memories_kind_newest"},
		{memory.Query{Text: "hello world", Limit: 10}, "VIRTUAL TABLE INDEX 0:M"},
		{memory.Query{Text: "世界", Kind: "fact", Limit: 10}, "VIRTUAL TABLE INDEX 0:M"},
	} {
		sql, args := recallSQL(nsA, tt.q)
		stmts = append(stmts, stmt{fmt.Sprintf("recall %+v", tt.q), sql, args, tt.want})
	}
	for _, s := range stmts {
		t.Run(s.name, func(t *testing.T) {
			rows, err := db.db.Query("EXPLAIN QUERY PLAN "+s.sql, s.args...)
			if err != nil {
				t.Fatalf("EXPLAIN QUERY PLAN = %v", err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if !strings.Contains(strings.Join(plan, "\n"), s.want) {
				t.Errorf("plan of %s = %q, want it to use %s", s.name, plan, s.want)
			}
			for _, d := range plan {
				if fullScan.MatchString(d) {
					t.Errorf("plan of %s = %q, want no full table scan", s.name, plan)
				}
			}
			t.Logf("%s: %q", s.name, plan)
		})
	}
}

// TestLeaseSamePodNameNewIncarnation: a pod re-created under the same name
// (new UID) is a new holder: it gets a new epoch, and the old incarnation
// can neither write nor release.
func TestLeaseSamePodNameNewIncarnation(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	old := holder("pod-a")
	reborn := old
	reborn.PodUID = "uid-pod-a-2"
	g1, err := db.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: old, TTL: time.Minute, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	// The old incarnation is gone (its pod was deleted): takeover.
	g2, err := db.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: reborn, TTL: time.Minute, Now: t0, TakeOver: g1.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if g2.Epoch != g1.Epoch+1 {
		t.Fatalf("re-created pod got epoch %d, want %d", g2.Epoch, g1.Epoch+1)
	}
	if _, err := db.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: reborn, TTL: time.Minute, Now: t0}); err != nil {
		t.Errorf("renewal by the same incarnation = %v", err)
	}
	_, err = db.PutWorkingState(ctx, nsA, "plan", memory.PutRequest{Holder: old, Epoch: g1.Epoch, IfVersion: 0, Value: json.RawMessage(`1`), Now: t0})
	if !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("old incarnation writes = %v, want ErrLeaseLost", err)
	}
	_, err = db.PutWorkingState(ctx, nsA, "plan", memory.PutRequest{Holder: old, Epoch: g2.Epoch, IfVersion: 0, Value: json.RawMessage(`1`), Now: t0})
	if !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("old incarnation writes with the new epoch = %v, want ErrLeaseLost", err)
	}
	if err := db.ReleaseStateLease(ctx, nsA, "plan", old, g2.Epoch); !errors.Is(err, memory.ErrLeaseLost) {
		t.Errorf("old incarnation releases = %v, want ErrLeaseLost", err)
	}
	// Without a takeover, the old incarnation's live lease blocks a new one.
	db2 := openTestDB(t)
	if _, err := db2.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: old, TTL: time.Minute, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := db2.AcquireStateLease(ctx, nsA, "plan", memory.LeaseRequest{Holder: reborn, TTL: time.Minute, Now: t0}); !errors.Is(err, memory.ErrLeaseHeld) {
		t.Errorf("same pod name, new UID, while old lease live = %v, want ErrLeaseHeld", err)
	}
}
