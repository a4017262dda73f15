package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
)

// testSignerInbox: entries come back oldest first with increasing ids,
// up to the limit; a batch removes the entries it recorded and writes its
// argument digests (a nil digest kept as nil) in the same commit; a
// batch refused as a conflict removes nothing.
func testSignerInbox(t *testing.T, st signer.Store) {
	ctx := context.Background()
	in, ok := st.(signer.InboxStore)
	if !ok {
		t.Fatal("store does not implement signer.InboxStore")
	}
	var put [][]byte
	for i := range 5 {
		put = append(put, fmt.Appendf(nil, `{"n":%d}`, i))
	}
	if err := in.PutInbox(ctx, put[:3]); err != nil {
		t.Fatal(err)
	}
	if err := in.PutInbox(ctx, put[3:]); err != nil {
		t.Fatal(err)
	}
	got, err := st.Inbox(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("Inbox(4) = %d entries", len(got))
	}
	for i, e := range got {
		if !bytes.Equal(e.Data, put[i]) || (i > 0 && e.ID <= got[i-1].ID) {
			t.Fatalf("entry %d = %d %s, want %s in id order", i, e.ID, e.Data, put[i])
		}
	}
	m := newSignerModel()
	d := m.begin()
	d.b.NewRuns = []signer.RunRow{signerRun("r1", 1)}
	l := d.leaf(t, "r1")
	d.b.Digests = []signer.ArgDigest{
		{Run: "r1", Index: l.Index, Pos: 1, Kind: signer.DigestRequested, Tool: "Bash", Digest: bytes.Repeat([]byte{7}, 32)},
		{Run: "r1", Index: l.Index, Pos: 0, Kind: signer.DigestRequested, Tool: "WebFetch"},
		{Run: "r1", Index: l.Index, Pos: 2, Kind: signer.DigestModelCall},
	}
	d.b.InboxDone = []int64{got[0].ID, got[1].ID}
	// A batch built on the same log, appended after d, conflicts: it
	// removes nothing.
	bad := m.begin()
	bad.leaf(t, "r1")
	bad.b.InboxDone = []int64{got[2].ID}
	appendDraft(t, st, d)
	if err := st.AppendBatch(ctx, &bad.b); err == nil {
		t.Fatal("conflicting batch accepted")
	}
	rest, err := st.Inbox(ctx, 10)
	if err != nil || len(rest) != 3 || rest[0].ID != got[2].ID {
		t.Fatalf("after the batch: %v %v, want the 3 entries not recorded", rest, err)
	}
	ds, err := st.ArgDigests(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 || ds[0].Tool != "WebFetch" || ds[0].Digest != nil || ds[1].Pos != 1 ||
		!bytes.Equal(ds[1].Digest, bytes.Repeat([]byte{7}, 32)) || ds[2].Pos != 2 || ds[2].Kind != signer.DigestModelCall {
		t.Fatalf("ArgDigests = %+v", ds)
	}
	if ds, err := st.ArgDigests(ctx, "other"); err != nil || len(ds) != 0 {
		t.Fatalf("ArgDigests(other) = %v, %v", ds, err)
	}
}

// testSignerDigestLeaves: a run's argument digests are those of its own
// leaves. A batch holding a digest that is not of one of the batch's
// leaves in the digest's run (another run's leaf, a leaf already stored,
// a leaf index past the batch; see also testSignerLeaflessBatch) is
// refused as a conflict and writes nothing.
func testSignerDigestLeaves(t *testing.T, st signer.Store) {
	ctx := context.Background()
	m := newSignerModel()
	d := m.begin()
	d.b.NewRuns = []signer.RunRow{signerRun("r1", 1), signerRun("r2", 1)}
	l1, l2 := d.leaf(t, "r1"), d.leaf(t, "r2")
	d.b.Digests = []signer.ArgDigest{
		{Run: "r2", Index: l2.Index, Kind: signer.DigestDecided, Tool: "Read"},
		{Run: "r1", Index: l1.Index, Kind: signer.DigestDecided, Tool: "Bash"},
	}
	appendDraft(t, st, d)
	for _, c := range []struct {
		name string
		run  string
		at   func(l signer.Leaf) int64 // the digest's index, from the batch's r1 leaf
	}{
		{"another run's leaf", "r2", func(l signer.Leaf) int64 { return l.Index }},
		{"a stored leaf", "r1", func(signer.Leaf) int64 { return l1.Index }},
		{"past the batch", "r1", func(l signer.Leaf) int64 { return l.Index + 1 }},
		{"before the log", "r1", func(signer.Leaf) int64 { return -1 }},
	} {
		bad := m.begin()
		l := bad.leaf(t, "r1")
		bad.b.Digests = []signer.ArgDigest{{Run: c.run, Index: c.at(l), Kind: signer.DigestDecided, Tool: "Evil"}}
		if err := st.AppendBatch(ctx, &bad.b); !errors.Is(err, signer.ErrLogConflict) {
			t.Fatalf("%s: AppendBatch = %v, want ErrLogConflict", c.name, err)
		}
	}
	if size, err := st.TreeSize(ctx); err != nil || size != 2 {
		t.Fatalf("tree size after the refusals = %d, %v; want 2", size, err)
	}
	for run, tool := range map[string]string{"r1": "Bash", "r2": "Read"} {
		ds, err := st.ArgDigests(ctx, run)
		if err != nil || len(ds) != 1 || ds[0].Tool != tool || ds[0].Run != run {
			t.Fatalf("ArgDigests(%s) = %+v, %v; want its one %s digest", run, ds, err, tool)
		}
	}
}

// testSignerLeaflessBatch: a batch without leaves that holds only meta
// commits; one that also holds an argument digest is refused as a
// conflict and commits none of its meta; a batch with leaves after the
// refusal commits.
func testSignerLeaflessBatch(t *testing.T, st signer.Store) {
	ctx := context.Background()
	if err := st.AppendBatch(ctx, &signer.Batch{Meta: map[string]string{"k": "v1"}}); err != nil {
		t.Fatalf("meta-only batch: %v", err)
	}
	bad := signer.Batch{Meta: map[string]string{"k": "v2"},
		Digests: []signer.ArgDigest{{Run: "r1", Index: 0, Kind: signer.DigestDecided, Tool: "Evil"}}}
	if err := st.AppendBatch(ctx, &bad); !errors.Is(err, signer.ErrLogConflict) {
		t.Fatalf("leafless batch with a digest: %v, want ErrLogConflict", err)
	}
	if v, err := st.Meta(ctx, "k"); err != nil || v != "v1" {
		t.Fatalf("meta after the refused batch = %q, %v; want v1", v, err)
	}
	m := newSignerModel()
	d := m.begin()
	d.b.NewRuns = []signer.RunRow{signerRun("r1", 1)}
	l := d.leaf(t, "r1")
	d.b.Digests = []signer.ArgDigest{{Run: "r1", Index: l.Index, Kind: signer.DigestDecided, Tool: "Bash", Digest: []byte{1}}}
	appendDraft(t, st, d)
	if ds, err := st.ArgDigests(ctx, "r1"); err != nil || len(ds) != 1 || ds[0].Tool != "Bash" {
		t.Fatalf("ArgDigests = %+v, %v", ds, err)
	}
}
