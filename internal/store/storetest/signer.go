package storetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/signer"
)

// Signer checks open's stores against the [signer.Store] contract, one
// subtest per property: batch atomicity, reads of every kind after a
// write, replacement rules (approvals by ID, checkpoints by size, policies
// idempotent, meta by name), [signer.ErrNotFound] for missing rows,
// fencing (a batch that does not extend the stored log is refused with
// [signer.ErrLogConflict] and commits nothing), and reads concurrent with
// appends seeing all of a batch or none of it.
//
// A store package's tests call it as
//
//	func TestSignerStore(t *testing.T) {
//		storetest.Signer(t, func(tb testing.TB) signer.Store { return openTestDB(tb) })
//	}
//
// Times in the suite are whole milliseconds (the precision every store
// keeps); records and salts hold arbitrary bytes, NUL and invalid UTF-8
// included.
func Signer(t *testing.T, open func(testing.TB) signer.Store) {
	for _, c := range []struct {
		name string
		f    func(*testing.T, signer.Store)
	}{
		{"AppendAndRead", testSignerAppendAndRead},
		{"ReadHashes", testSignerReadHashes},
		{"RunLeavesOrder", testSignerRunLeavesOrder},
		{"BatchAtomicity", testSignerBatchAtomicity},
		{"Runs", testSignerRuns},
		{"Approvals", testSignerApprovals},
		{"Checkpoints", testSignerCheckpoints},
		{"Policies", testSignerPolicies},
		{"Meta", testSignerMeta},
		{"NotFound", testSignerNotFound},
		{"Fencing", testSignerFencing},
		{"ConcurrentReads", testSignerConcurrentReads},
		{"Inbox", testSignerInbox},
		{"DigestLeaves", testSignerDigestLeaves},
		{"LeaflessBatch", testSignerLeaflessBatch},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, open(t)) })
	}
}

// SignerReplicas races stores, handles on one fresh database (one per
// replica or process), and checks single-writer fencing: in each round
// every goroutine appends a batch built on the same stored log, exactly
// one commits and every other is refused with [signer.ErrLogConflict];
// afterwards the stored log is the winners' batches and nothing else
// (tree size, every stored hash, every run's leaves in run_seq order with
// no gap or repeat, the winner's meta).
func SignerReplicas(t *testing.T, stores ...signer.Store) {
	t.Helper()
	if len(stores) < 2 {
		t.Fatalf("SignerReplicas needs at least 2 handles, got %d", len(stores))
	}
	ctx := context.Background()
	racers := 2 * len(stores)
	const rounds = 10
	m := newSignerModel()
	want := map[string][]signer.Leaf{}
	for round := range rounds {
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			errs   = make([]error, racers)
			drafts = make([]*signerDraft, racers)
		)
		for g := range racers {
			d := m.begin()
			d.tag = fmt.Sprintf(" by racer %d", g)
			d.leaf(t, "shared")
			d.leaf(t, fmt.Sprintf("own%d", g%2))
			d.leaf(t, "shared")
			d.b.Meta = map[string]string{"winner": fmt.Sprint(g)}
			drafts[g] = d
			st := stores[g%len(stores)]
			wg.Go(func() {
				<-start
				errs[g] = st.AppendBatch(ctx, &d.b)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for g, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both appended leaves from %d: the log forked", round, winner, g, m.size)
			case err == nil:
				winner = g
			case !errors.Is(err, signer.ErrLogConflict):
				t.Errorf("round %d: racer %d: AppendBatch = %v, want nil or ErrLogConflict", round, g, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer appended", round)
		}
		if v, err := stores[0].Meta(ctx, "winner"); err != nil || v != fmt.Sprint(winner) {
			t.Errorf("round %d: Meta(winner) = %q, %v, want %d (a loser's batch left its meta)", round, v, err, winner)
		}
		for _, l := range drafts[winner].b.Leaves {
			want[l.Run] = append(want[l.Run], l)
		}
		drafts[winner].commit()
	}
	for _, st := range stores {
		if n, err := st.TreeSize(ctx); err != nil || n != m.size {
			t.Errorf("TreeSize() = %d, %v, want %d", n, err, m.size)
		}
	}
	idx := slices.Sorted(maps.Keys(m.hashes))
	hs, err := stores[len(stores)-1].ReadHashes(ctx, idx)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range idx {
		if hs[i] != m.hashes[x] {
			t.Fatalf("stored hash %d = %x, want the winners' %x", x, hs[i], m.hashes[x])
		}
	}
	for run, ls := range want {
		got, err := stores[0].RunLeaves(ctx, run)
		if err != nil || len(got) != len(ls) {
			t.Fatalf("RunLeaves(%s) = %d leaves, %v, want %d", run, len(got), err, len(ls))
		}
		for i := range got {
			if !sameLeaf(got[i], ls[i]) {
				t.Errorf("RunLeaves(%s)[%d] = %+v, want %+v", run, i, got[i], ls[i])
			}
		}
	}
}

// signerT0 is the suite's base time.
var signerT0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func signerAt(ms int64) time.Time { return signerT0.Add(time.Duration(ms) * time.Millisecond) }

// signerModel is what the suite expects the store to hold: the tree size,
// each run's next run_seq, and every tlog stored hash.
type signerModel struct {
	size   int64
	next   map[string]int64
	hashes map[int64]tlog.Hash
}

func newSignerModel() *signerModel {
	return &signerModel{next: map[string]int64{}, hashes: map[int64]tlog.Hash{}}
}

// signerDraft is a batch built on a model; commit adopts it once the
// store has.
type signerDraft struct {
	m      *signerModel
	size   int64
	next   map[string]int64
	hashes map[int64]tlog.Hash
	tag    string // in every record, to tell racing writers' records apart
	b      signer.Batch
}

func (m *signerModel) begin() *signerDraft {
	return &signerDraft{m: m, size: m.size, next: maps.Clone(m.next), hashes: map[int64]tlog.Hash{}}
}

// leaf adds the next leaf of run (and its stored hashes) to the batch.
func (d *signerDraft) leaf(t testing.TB, run string) signer.Leaf {
	t.Helper()
	rec := fmt.Appendf(nil, "record %d of %q%s\x00\xff", d.size, run, d.tag)
	hs, err := tlog.StoredHashes(d.size, rec, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			h, ok := d.hashes[x]
			if !ok {
				h, ok = d.m.hashes[x]
			}
			if !ok {
				return nil, fmt.Errorf("model has no hash %d", x)
			}
			out[i] = h
		}
		return out, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	base := tlog.StoredHashCount(d.size)
	for i, h := range hs {
		d.hashes[base+int64(i)] = h
		d.b.Hashes = append(d.b.Hashes, signer.IndexedHash{Index: base + int64(i), Hash: h})
	}
	l := signer.Leaf{Index: d.size, Run: run, RunSeq: d.next[run], Type: "test.record", Record: rec}
	d.b.Leaves = append(d.b.Leaves, l)
	d.size++
	d.next[run]++
	return l
}

// leaves adds n leaves to each of runs, interleaved.
func (d *signerDraft) leaves(t testing.TB, n int, runs ...string) {
	t.Helper()
	for range n {
		for _, r := range runs {
			d.leaf(t, r)
		}
	}
}

func (d *signerDraft) commit() {
	d.m.size, d.m.next = d.size, d.next
	maps.Copy(d.m.hashes, d.hashes)
}

// appendDraft appends d's batch and adopts it into the model.
func appendDraft(t testing.TB, st signer.Store, d *signerDraft) {
	t.Helper()
	if err := st.AppendBatch(context.Background(), &d.b); err != nil {
		t.Fatalf("AppendBatch(%d leaves from %d) = %v", len(d.b.Leaves), d.m.size, err)
	}
	d.commit()
}

func signerRun(id string, created int64) signer.RunRow {
	return signer.RunRow{ID: id, Tenant: "agents", Agent: "support-agent", Session: "pod-" + id,
		Identity: []byte(`{"tenant":"agents","agent":"support-agent","b":1,"a":[2]}`), CreatedAt: signerAt(created)}
}

func signerSalt(index int64) signer.Salt {
	return signer.Salt{Index: index, Salt: bytes.Repeat([]byte{byte(index), 0}, 16)}
}

func sameLeaf(a, b signer.Leaf) bool {
	return a.Index == b.Index && a.Run == b.Run && a.RunSeq == b.RunSeq && a.Type == b.Type && bytes.Equal(a.Record, b.Record)
}

func sameRun(a, b signer.RunRow) bool {
	return a.ID == b.ID && a.Tenant == b.Tenant && a.Agent == b.Agent && a.Session == b.Session &&
		bytes.Equal(a.Identity, b.Identity) && a.CreatedAt.Equal(b.CreatedAt) && a.ClosedReason == b.ClosedReason
}

func sameApproval(a, b signer.ApprovalRow) bool {
	return a.ID == b.ID && a.Run == b.Run && a.CallID == b.CallID && a.Tool == b.Tool && a.Index == b.Index &&
		a.Commitment == b.Commitment && a.CreatedAt.Equal(b.CreatedAt) && a.ExpiresAt.Equal(b.ExpiresAt) &&
		a.State == b.State && a.ResolvedAt.Equal(b.ResolvedAt)
}

func testSignerAppendAndRead(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	d := m.begin()
	l0 := d.leaf(t, "r1")
	l1 := d.leaf(t, "r1")
	d.b.NewRuns = []signer.RunRow{signerRun("r1", 1)}
	d.b.Salts = []signer.Salt{signerSalt(l1.Index)}
	call := signer.CallRow{Run: "r1", CallID: "c1", Tool: "Bash", Effect: "allow", Index: l1.Index, Commitment: "sha256:aa"}
	d.b.Calls = []signer.CallRow{call}
	ap := signer.ApprovalRow{ID: "ap1", Run: "r1", CallID: "c1", Tool: "Bash", Index: l1.Index, Commitment: "sha256:aa",
		CreatedAt: signerAt(2), ExpiresAt: signerAt(3_600_002), State: signer.ApprovalPending}
	d.b.Approvals = []signer.ApprovalRow{ap}
	d.b.Meta = map[string]string{"rollback": `{"witness_size":3}`}
	appendDraft(t, st, d)

	if n, err := st.TreeSize(ctx); err != nil || n != 2 {
		t.Errorf("TreeSize() = %d, %v, want 2", n, err)
	}
	if got, err := st.RunLeaves(ctx, "r1"); err != nil || len(got) != 2 || !sameLeaf(got[0], l0) || !sameLeaf(got[1], l1) {
		t.Errorf("RunLeaves(r1) = %+v, %v, want [%+v %+v]", got, err, l0, l1)
	}
	if got, err := st.LastLeaf(ctx, "r1"); err != nil || !sameLeaf(got, l1) {
		t.Errorf("LastLeaf(r1) = %+v, %v, want %+v", got, err, l1)
	}
	if got, err := st.Run(ctx, "r1"); err != nil || !sameRun(got, signerRun("r1", 1)) {
		t.Errorf("Run(r1) = %+v, %v, want %+v", got, err, signerRun("r1", 1))
	}
	if got, err := st.Calls(ctx, "r1"); err != nil || !slices.Equal(got, []signer.CallRow{call}) {
		t.Errorf("Calls(r1) = %+v, %v, want [%+v]", got, err, call)
	}
	if got, err := st.Salt(ctx, l1.Index); err != nil || !bytes.Equal(got, signerSalt(l1.Index).Salt) {
		t.Errorf("Salt(%d) = %x, %v, want %x", l1.Index, got, err, signerSalt(l1.Index).Salt)
	}
	if got, err := st.Approval(ctx, "ap1"); err != nil || !sameApproval(got, ap) {
		t.Errorf("Approval(ap1) = %+v, %v, want %+v", got, err, ap)
	}
	if got, err := st.Approvals(ctx, "r1"); err != nil || len(got) != 1 || !sameApproval(got[0], ap) {
		t.Errorf("Approvals(r1) = %+v, %v, want [%+v]", got, err, ap)
	}
	if got, err := st.Meta(ctx, "rollback"); err != nil || got != `{"witness_size":3}` {
		t.Errorf("Meta(rollback) = %q, %v", got, err)
	}
	// Lists of a run with no rows are empty, not errors.
	if got, err := st.RunLeaves(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("RunLeaves(nope) = %+v, %v, want none", got, err)
	}
	if got, err := st.Calls(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("Calls(nope) = %+v, %v, want none", got, err)
	}
	if got, err := st.Approvals(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("Approvals(nope) = %+v, %v, want none", got, err)
	}
}

func testSignerReadHashes(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	for _, n := range []int{1, 6, 57} {
		d := m.begin()
		d.leaves(t, n, "r")
		appendDraft(t, st, d)
	}
	count := tlog.StoredHashCount(m.size)
	if int64(len(m.hashes)) != count {
		t.Fatalf("model has %d hashes, want %d", len(m.hashes), count)
	}
	// Every stored hash, in reverse order, with duplicates.
	var idx []int64
	for x := count - 1; x >= 0; x-- {
		idx = append(idx, x)
		if x%5 == 0 {
			idx = append(idx, x)
		}
	}
	got, err := st.ReadHashes(ctx, idx)
	if err != nil || len(got) != len(idx) {
		t.Fatalf("ReadHashes(%d indexes) = %d hashes, %v", len(idx), len(got), err)
	}
	for i, x := range idx {
		if got[i] != m.hashes[x] {
			t.Fatalf("ReadHashes: hash %d = %x, want %x", x, got[i], m.hashes[x])
		}
	}
	if got, err := st.ReadHashes(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("ReadHashes(nil) = %v, %v, want none", got, err)
	}
	// The tree the store holds is the model's.
	want, err := tlog.TreeHash(m.size, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = m.hashes[x]
		}
		return out, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	root, err := tlog.TreeHash(m.size, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		return st.ReadHashes(ctx, idx)
	}))
	if err != nil || root != want {
		t.Errorf("TreeHash(%d) from the store = %x, %v, want %x", m.size, root, err, want)
	}
	if _, err := st.ReadHashes(ctx, []int64{0, count, 1}); !errors.Is(err, signer.ErrNotFound) {
		t.Errorf("ReadHashes with a missing index = %v, want ErrNotFound", err)
	}
}

func testSignerRunLeavesOrder(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	var want = map[string][]signer.Leaf{}
	for i := range 4 {
		d := m.begin()
		for j := range 3 + i {
			r := []string{"a", "b", "c"}[(i+j)%3]
			want[r] = append(want[r], d.leaf(t, r))
		}
		appendDraft(t, st, d)
	}
	for _, r := range []string{"a", "b", "c"} {
		got, err := st.RunLeaves(ctx, r)
		if err != nil || len(got) != len(want[r]) {
			t.Fatalf("RunLeaves(%s) = %d leaves, %v, want %d", r, len(got), err, len(want[r]))
		}
		for i := range got {
			if !sameLeaf(got[i], want[r][i]) || got[i].RunSeq != int64(i) {
				t.Errorf("RunLeaves(%s)[%d] = %+v, want %+v", r, i, got[i], want[r][i])
			}
		}
		last, err := st.LastLeaf(ctx, r)
		if w := want[r][len(want[r])-1]; err != nil || !sameLeaf(last, w) {
			t.Errorf("LastLeaf(%s) = %+v, %v, want %+v", r, last, err, w)
		}
	}
}

// testSignerBatchAtomicity: a batch that fails part-way (each case adds one bad
// row after good ones of every kind) leaves nothing, and the store then
// takes the same batch without the bad row.
func testSignerBatchAtomicity(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	d := m.begin()
	first := d.leaf(t, "r1")
	d.b.NewRuns = []signer.RunRow{signerRun("r1", 1)}
	d.b.Salts = []signer.Salt{signerSalt(first.Index)}
	d.b.Calls = []signer.CallRow{{Run: "r1", CallID: "c0", Tool: "Bash", Effect: "allow", Index: first.Index, Commitment: "x"}}
	ap := signer.ApprovalRow{ID: "ap1", Run: "r1", CallID: "c0", Tool: "Bash", Index: first.Index, Commitment: "x",
		CreatedAt: signerAt(1), ExpiresAt: signerAt(2), State: signer.ApprovalPending}
	d.b.Approvals = []signer.ApprovalRow{ap}
	d.b.Meta = map[string]string{"k": "v0"}
	appendDraft(t, st, d)

	good := func() *signerDraft {
		d := m.begin()
		d.leaves(t, 3, "r1", "r2")
		d.b.NewRuns = []signer.RunRow{signerRun("r2", 5)}
		d.b.ClosedRuns = []signer.RunClose{{ID: "r1", Reason: "closed"}}
		d.b.Salts = []signer.Salt{signerSalt(d.b.Leaves[1].Index)}
		d.b.Calls = []signer.CallRow{{Run: "r2", CallID: "c1", Tool: "Bash", Effect: "allow", Index: d.b.Leaves[1].Index, Commitment: "y"}}
		a := ap
		a.State, a.ResolvedAt = signer.ApprovalApproved, signerAt(3)
		d.b.Approvals = []signer.ApprovalRow{a, {ID: "ap2", Run: "r2", CallID: "c1", Tool: "Bash", Index: d.b.Leaves[1].Index,
			Commitment: "y", CreatedAt: signerAt(4), ExpiresAt: signerAt(5), State: signer.ApprovalPending}}
		d.b.Meta = map[string]string{"k": "v1", "k2": "v"}
		return d
	}
	for _, c := range []struct {
		name string
		bad  func(d *signerDraft)
	}{
		{"duplicate leaf", func(d *signerDraft) { d.b.Leaves = append(d.b.Leaves, first) }},
		{"duplicate hash", func(d *signerDraft) { d.b.Hashes = append(d.b.Hashes, signer.IndexedHash{Index: 0}) }},
		{"duplicate salt", func(d *signerDraft) { d.b.Salts = append(d.b.Salts, signerSalt(first.Index)) }},
		{"duplicate run", func(d *signerDraft) { d.b.NewRuns = append(d.b.NewRuns, signerRun("r1", 9)) }},
		{"duplicate call", func(d *signerDraft) {
			d.b.Calls = append(d.b.Calls, signer.CallRow{Run: "r1", CallID: "c0", Tool: "Bash", Effect: "deny", Index: first.Index, Commitment: "z"})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := good()
			c.bad(d)
			if err := st.AppendBatch(ctx, &d.b); err == nil {
				t.Fatal("AppendBatch of a bad batch = nil, want an error")
			}
			if n, err := st.TreeSize(ctx); err != nil || n != m.size {
				t.Errorf("TreeSize() = %d, %v, want %d (unchanged)", n, err, m.size)
			}
			if _, err := st.ReadHashes(ctx, []int64{tlog.StoredHashCount(m.size)}); !errors.Is(err, signer.ErrNotFound) {
				t.Errorf("ReadHashes(first new hash) = %v, want ErrNotFound", err)
			}
			if _, err := st.Run(ctx, "r2"); !errors.Is(err, signer.ErrNotFound) {
				t.Errorf("Run(r2) = %v, want ErrNotFound", err)
			}
			if r, err := st.Run(ctx, "r1"); err != nil || r.ClosedReason != "" {
				t.Errorf("Run(r1) = %+v, %v, want open", r, err)
			}
			if _, err := st.Salt(ctx, d.b.Leaves[1].Index); !errors.Is(err, signer.ErrNotFound) {
				t.Errorf("Salt(new) = %v, want ErrNotFound", err)
			}
			if got, err := st.Calls(ctx, "r2"); err != nil || len(got) != 0 {
				t.Errorf("Calls(r2) = %+v, %v, want none", got, err)
			}
			if got, err := st.Approval(ctx, "ap1"); err != nil || !sameApproval(got, ap) {
				t.Errorf("Approval(ap1) = %+v, %v, want unchanged %+v", got, err, ap)
			}
			if _, err := st.Approval(ctx, "ap2"); !errors.Is(err, signer.ErrNotFound) {
				t.Errorf("Approval(ap2) = %v, want ErrNotFound", err)
			}
			if v, err := st.Meta(ctx, "k"); err != nil || v != "v0" {
				t.Errorf("Meta(k) = %q, %v, want v0", v, err)
			}
			if _, err := st.Meta(ctx, "k2"); !errors.Is(err, signer.ErrNotFound) {
				t.Errorf("Meta(k2) = %v, want ErrNotFound", err)
			}
		})
	}
	d = good()
	appendDraft(t, st, d)
	if n, err := st.TreeSize(ctx); err != nil || n != 7 {
		t.Errorf("TreeSize() after the good batch = %d, %v, want 7", n, err)
	}
	if v, err := st.Meta(ctx, "k"); err != nil || v != "v1" {
		t.Errorf("Meta(k) after the good batch = %q, %v, want v1", v, err)
	}
}

func testSignerRuns(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	d := m.begin()
	d.leaves(t, 1, "a", "b", "c")
	d.b.NewRuns = []signer.RunRow{signerRun("a", 1), signerRun("b", 2), signerRun("c", 3)}
	d.b.ClosedRuns = []signer.RunClose{{ID: "c", Reason: "closed"}} // closed in the batch that opens it
	appendDraft(t, st, d)
	d = m.begin()
	d.leaf(t, "a")
	d.b.ClosedRuns = []signer.RunClose{{ID: "a", Reason: "idle_timeout"}}
	appendDraft(t, st, d)

	open, err := st.OpenRuns(ctx)
	if err != nil || len(open) != 1 || !sameRun(open[0], signerRun("b", 2)) {
		t.Errorf("OpenRuns() = %+v, %v, want [b]", open, err)
	}
	for id, reason := range map[string]string{"a": "idle_timeout", "b": "", "c": "closed"} {
		if r, err := st.Run(ctx, id); err != nil || r.ClosedReason != reason {
			t.Errorf("Run(%s) = %+v, %v, want closed_reason %q", id, r, err, reason)
		}
	}
}

func testSignerApprovals(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	d := m.begin()
	l := d.leaf(t, "r")
	pending := signer.ApprovalRow{ID: "ap1", Run: "r", CallID: "c1", Tool: "Deploy", Index: l.Index, Commitment: "sha256:01",
		CreatedAt: signerAt(10), ExpiresAt: signerAt(3_600_010), State: signer.ApprovalPending}
	other := pending
	other.ID, other.CallID = "ap2", "c2"
	d.b.Approvals = []signer.ApprovalRow{pending, other}
	appendDraft(t, st, d)

	// Replaced by ID in a batch without leaves; twice in one batch, the
	// later row wins.
	approved := pending
	approved.State, approved.ResolvedAt = signer.ApprovalApproved, signerAt(20)
	consumed := approved
	consumed.State = signer.ApprovalConsumed
	d = m.begin()
	d.b.Approvals = []signer.ApprovalRow{approved, consumed}
	appendDraft(t, st, d)

	if got, err := st.Approval(ctx, "ap1"); err != nil || !sameApproval(got, consumed) {
		t.Errorf("Approval(ap1) = %+v, %v, want %+v", got, err, consumed)
	}
	got, err := st.Approvals(ctx, "r")
	if err != nil || len(got) != 2 {
		t.Fatalf("Approvals(r) = %+v, %v, want 2", got, err)
	}
	slices.SortFunc(got, func(a, b signer.ApprovalRow) int { return cmp.Compare(a.ID, b.ID) })
	if !sameApproval(got[0], consumed) || !sameApproval(got[1], other) {
		t.Errorf("Approvals(r) = %+v, want [%+v %+v]", got, consumed, other)
	}
}

func testSignerCheckpoints(t *testing.T, st signer.Store) {
	ctx := context.Background()
	for _, c := range []signer.CheckpointRow{
		{Size: 3, Note: []byte("note 3\n"), CreatedAt: signerAt(1)},
		{Size: 5, Note: []byte("note 5\n"), CreatedAt: signerAt(2)},
		{Size: 5, Note: []byte("note 5\n— witness cosig\n"), CreatedAt: signerAt(3)}, // adds a cosignature
		{Size: 4, Note: []byte("note 4\n"), CreatedAt: signerAt(4)},
	} {
		if err := st.PutCheckpoint(ctx, c); err != nil {
			t.Fatalf("PutCheckpoint(%d) = %v", c.Size, err)
		}
	}
	got, err := st.LatestCheckpoint(ctx)
	if err != nil || got.Size != 5 || string(got.Note) != "note 5\n— witness cosig\n" {
		t.Errorf("LatestCheckpoint() = %d %q, %v, want 5 with the cosignature", got.Size, got.Note, err)
	}
	if got.CreatedAt.Before(signerAt(2)) || got.CreatedAt.After(signerAt(3)) {
		t.Errorf("LatestCheckpoint().CreatedAt = %v, want the first or the replacing put's", got.CreatedAt)
	}
}

func testSignerPolicies(t *testing.T, st signer.Store) {
	ctx := context.Background()
	snap := []byte("rules:\n  - id: A\n")
	for range 2 {
		if err := st.PutPolicy(ctx, "aa11", snap); err != nil {
			t.Fatalf("PutPolicy(aa11) = %v", err)
		}
	}
	if err := st.PutPolicy(ctx, "empty", nil); err != nil {
		t.Fatalf("PutPolicy(empty, nil) = %v", err)
	}
	if got, err := st.Policy(ctx, "aa11"); err != nil || !bytes.Equal(got, snap) {
		t.Errorf("Policy(aa11) = %q, %v, want %q", got, err, snap)
	}
	if got, err := st.Policy(ctx, "empty"); err != nil || len(got) != 0 {
		t.Errorf("Policy(empty) = %q, %v, want empty", got, err)
	}
}

func testSignerMeta(t *testing.T, st signer.Store) {
	ctx := context.Background()
	for _, v := range []string{"one", "two"} {
		b := &signer.Batch{Meta: map[string]string{"name": v, "other": "x"}}
		if err := st.AppendBatch(ctx, b); err != nil {
			t.Fatalf("AppendBatch(meta %s) = %v", v, err)
		}
	}
	if got, err := st.Meta(ctx, "name"); err != nil || got != "two" {
		t.Errorf("Meta(name) = %q, %v, want two", got, err)
	}
	if n, err := st.TreeSize(ctx); err != nil || n != 0 {
		t.Errorf("TreeSize() after meta-only batches = %d, %v, want 0", n, err)
	}
}

func testSignerNotFound(t *testing.T, st signer.Store) {
	ctx := context.Background()
	if n, err := st.TreeSize(ctx); err != nil || n != 0 {
		t.Errorf("TreeSize() of an empty store = %d, %v, want 0", n, err)
	}
	if got, err := st.OpenRuns(ctx); err != nil || len(got) != 0 {
		t.Errorf("OpenRuns() of an empty store = %+v, %v, want none", got, err)
	}
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"ReadHashes", func() error { _, err := st.ReadHashes(ctx, []int64{0}); return err }},
		{"LastLeaf", func() error { _, err := st.LastLeaf(ctx, "r"); return err }},
		{"Run", func() error { _, err := st.Run(ctx, "r"); return err }},
		{"Approval", func() error { _, err := st.Approval(ctx, "ap"); return err }},
		{"Salt", func() error { _, err := st.Salt(ctx, 0); return err }},
		{"LatestCheckpoint", func() error { _, err := st.LatestCheckpoint(ctx); return err }},
		{"Policy", func() error { _, err := st.Policy(ctx, "aa"); return err }},
		{"Meta", func() error { _, err := st.Meta(ctx, "rollback"); return err }},
	} {
		if err := c.f(); !errors.Is(err, signer.ErrNotFound) {
			t.Errorf("%s of a missing row = %v, want ErrNotFound", c.name, err)
		}
	}
}

// testSignerFencing: on a log of 3 leaves (run r's head at run_seq 1), a batch that
// does not extend it is refused with ErrLogConflict and commits nothing.
func testSignerFencing(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	d := m.begin()
	d.leaves(t, 2, "r")
	d.leaf(t, "s")
	appendDraft(t, st, d)
	for _, c := range []struct {
		name  string
		batch func(d *signerDraft)
	}{
		{"index behind the tree size", func(d *signerDraft) { d.leaf(t, "r"); d.b.Leaves[0].Index-- }},
		{"index past the tree size", func(d *signerDraft) { d.leaf(t, "r"); d.b.Leaves[0].Index++ }},
		{"index gap inside the batch", func(d *signerDraft) { d.leaf(t, "r"); d.leaf(t, "s"); d.b.Leaves[1].Index++ }},
		{"run_seq repeats the head", func(d *signerDraft) { d.leaf(t, "r"); d.b.Leaves[0].RunSeq-- }},
		{"run_seq skips", func(d *signerDraft) { d.leaf(t, "r"); d.b.Leaves[0].RunSeq++ }},
		{"run_seq repeats inside the batch", func(d *signerDraft) { d.leaf(t, "r"); d.leaf(t, "r"); d.b.Leaves[1].RunSeq-- }},
		{"new run not from 0", func(d *signerDraft) { d.leaf(t, "new"); d.b.Leaves[0].RunSeq = 1 }},
		{"second run stale", func(d *signerDraft) { d.leaf(t, "r"); d.leaf(t, "s"); d.b.Leaves[1].RunSeq = 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := m.begin()
			c.batch(d)
			d.b.NewRuns = []signer.RunRow{signerRun("fenced", 1)}
			d.b.Meta = map[string]string{"fenced": "yes"}
			err := st.AppendBatch(ctx, &d.b)
			if !errors.Is(err, signer.ErrLogConflict) {
				t.Fatalf("AppendBatch = %v, want ErrLogConflict", err)
			}
			if n, err := st.TreeSize(ctx); err != nil || n != m.size {
				t.Errorf("TreeSize() = %d, %v, want %d (unchanged)", n, err, m.size)
			}
			if l, err := st.LastLeaf(ctx, "r"); err != nil || l.RunSeq != 1 {
				t.Errorf("LastLeaf(r) = %+v, %v, want run_seq 1", l, err)
			}
			if _, err := st.Run(ctx, "fenced"); !errors.Is(err, signer.ErrNotFound) {
				t.Errorf("Run(fenced) = %v, want ErrNotFound", err)
			}
			if _, err := st.Meta(ctx, "fenced"); !errors.Is(err, signer.ErrNotFound) {
				t.Errorf("Meta(fenced) = %v, want ErrNotFound", err)
			}
		})
	}
	d = m.begin()
	d.leaf(t, "r")
	d.leaf(t, "new")
	appendDraft(t, st, d)
}

// testSignerConcurrentReads: while batches of 2×k leaves (k per run, each with
// a call and a salt) are appended, readers never see part of one.
func testSignerConcurrentReads(t *testing.T, st signer.Store) {
	ctx := context.Background()
	const k, batches, readers = 4, 30, 3
	m := newSignerModel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for reads := 0; ; reads++ {
				select {
				case <-done:
					if reads == 0 {
						t.Error("reader never ran")
					}
					return
				default:
				}
				if err := signerWhole(ctx, st, k); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range batches {
		d := m.begin()
		for range k {
			for _, r := range []string{"a", "b"} {
				l := d.leaf(t, r)
				d.b.Salts = append(d.b.Salts, signerSalt(l.Index))
				d.b.Calls = append(d.b.Calls, signer.CallRow{Run: r, CallID: fmt.Sprintf("c%d", l.Index), Tool: "Bash",
					Effect: "allow", Index: l.Index, Commitment: "x"})
			}
		}
		if i == 0 {
			d.b.NewRuns = []signer.RunRow{signerRun("a", 0), signerRun("b", 0)}
		}
		if err := st.AppendBatch(ctx, &d.b); err != nil {
			close(done)
			wg.Wait()
			t.Fatalf("AppendBatch %d = %v", i, err)
		}
		d.commit()
	}
	close(done)
	wg.Wait()
	if err := signerWhole(ctx, st, k); err != nil {
		t.Error(err)
	}
	if n, _ := st.TreeSize(ctx); n != 2*k*batches {
		t.Errorf("TreeSize() = %d, want %d", n, 2*k*batches)
	}
}

// signerWhole reads what testSignerConcurrentReads writes and reports a read
// that saw part of a batch.
func signerWhole(ctx context.Context, st signer.Store, k int64) error {
	n, err := st.TreeSize(ctx)
	if err != nil {
		return fmt.Errorf("TreeSize() = %v", err)
	}
	if n%(2*k) != 0 {
		return fmt.Errorf("TreeSize() = %d, not a whole number of %d-leaf batches", n, 2*k)
	}
	// Whatever a later read sees includes the batches TreeSize saw.
	idx := make([]int64, tlog.StoredHashCount(n))
	for i := range idx {
		idx[i] = int64(i)
	}
	if _, err := st.ReadHashes(ctx, idx); err != nil {
		return fmt.Errorf("ReadHashes(every hash of a tree of %d) = %v", n, err)
	}
	leaves, err := st.RunLeaves(ctx, "a")
	if err != nil {
		return fmt.Errorf("RunLeaves(a) = %v", err)
	}
	if int64(len(leaves))%k != 0 || int64(len(leaves)) < n/2 {
		return fmt.Errorf("RunLeaves(a) = %d leaves, want a multiple of %d, at least %d", len(leaves), k, n/2)
	}
	for i, l := range leaves {
		if l.RunSeq != int64(i) {
			return fmt.Errorf("RunLeaves(a)[%d].RunSeq = %d", i, l.RunSeq)
		}
	}
	calls, err := st.Calls(ctx, "b")
	if err != nil {
		return fmt.Errorf("Calls(b) = %v", err)
	}
	if int64(len(calls))%k != 0 {
		return fmt.Errorf("Calls(b) = %d rows, want a multiple of %d", len(calls), k)
	}
	if len(calls) > 0 {
		if l, err := st.LastLeaf(ctx, "b"); err != nil || (l.RunSeq+1)%k != 0 {
			return fmt.Errorf("LastLeaf(b) = run_seq %d, %v, want one before a multiple of %d", l.RunSeq, err, k)
		}
	}
	return nil
}
