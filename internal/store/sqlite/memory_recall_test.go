package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

var nsB = memory.Namespace{Tenant: "agents", Agent: "run-2"}

// bulkRemember inserts texts into ns in one transaction.
func bulkRemember(t *testing.T, db *DB, ns memory.Namespace, texts []string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for i, text := range texts {
			id, err := memory.NewID(t0.Add(time.Duration(i) * time.Second))
			if err != nil {
				return err
			}
			ids = append(ids, memory.FormatID(id))
			if err := db.insertMemory(ctx, tx, ns, memory.Memory{Kind: "note", Text: text, Session: "pod", CreatedAt: t0.Add(time.Duration(i) * time.Second)}, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// exactRecall runs recallSQL alone (exact below recallCap matches in ns).
func exactRecall(t *testing.T, db *DB, ns memory.Namespace, q memory.Query) []string {
	t.Helper()
	query, args := recallSQL(ns, q)
	rows, err := db.db.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		m, err := scanMemory(rows)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

// TestRecallOtherNamespacesRankFirst: the best FTS5 candidates of the
// index are all another namespace's; a recall still returns only its own
// namespace's memories, best first, as the exact statement does.
func TestRecallOtherNamespacesRankFirst(t *testing.T) {
	db := openTestDB(t)
	var strong, weak []string
	for i := range 300 {
		strong = append(strong, fmt.Sprintf("alpha alpha alpha %d", i))
	}
	for i := range 15 {
		weak = append(weak, fmt.Sprintf("alpha %s %d", strings.Repeat("filler ", i%5+1), i))
	}
	bIDs := bulkRemember(t, db, nsB, strong)
	aIDs := bulkRemember(t, db, nsA, weak)
	for _, limit := range []int{1, 3, 10, 20} {
		q := memory.Query{Text: "alpha", Limit: limit}
		got, err := db.RecallMemories(context.Background(), nsA, q)
		if err != nil {
			t.Fatal(err)
		}
		ids := memIDList(got)
		if want := exactRecall(t, db, nsA, q); !slices.Equal(ids, want) {
			t.Errorf("RecallMemories(limit %d) = %v, want %v", limit, ids, want)
		}
		if len(ids) != min(limit, len(aIDs)) {
			t.Errorf("RecallMemories(limit %d) returned %d, want %d", limit, len(ids), min(limit, len(aIDs)))
		}
		for _, id := range ids {
			if slices.Contains(bIDs, id) {
				t.Fatalf("RecallMemories(limit %d) returned %s of another namespace", limit, id)
			}
		}
	}
}

// TestRecallBroadQueryBounded: a query matching more than recallCap
// memories, most of another namespace, still returns this namespace's
// matches and no other's.
func TestRecallBroadQueryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts over 2000 memories")
	}
	db := openTestDB(t)
	var other, own []string
	for i := range recallCap + 100 {
		other = append(other, fmt.Sprintf("common common word %d", i))
	}
	for i := range 5 {
		own = append(own, fmt.Sprintf("common here %d", i))
	}
	bIDs := bulkRemember(t, db, nsB, other)
	aIDs := bulkRemember(t, db, nsA, own)
	got, err := db.RecallMemories(context.Background(), nsA, memory.Query{Text: "common", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	ids := memIDList(got)
	slices.Sort(ids)
	slices.Sort(aIDs)
	if !slices.Equal(ids, aIDs) {
		t.Errorf("RecallMemories(common) = %v, want this namespace's %v", ids, aIDs)
	}
	got, err = db.RecallMemories(context.Background(), nsB, memory.Query{Text: "common", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Errorf("RecallMemories(nsB, common) returned %d, want 10", len(got))
	}
	for _, m := range got {
		if !slices.Contains(bIDs, m.ID) {
			t.Errorf("RecallMemories(nsB, common) returned %s, not of nsB", m.ID)
		}
	}
}

func memIDList(ms []memory.Memory) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestRecallTiesAtCut: many matches tie on score (texts alike), in two
// namespaces, some created in the same millisecond; a recall whose cut
// falls among them returns what the exact statement does, and so does
// the fast path whenever it claims an exact answer.
func TestRecallTiesAtCut(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for i := range 200 {
			ns, text := nsA, fmt.Sprintf("cafe tie %d", i)
			switch {
			case i%3 == 0:
				ns = nsB
			case i%17 == 0:
				text = fmt.Sprintf("cafe cafe %d", i) // ranks before the ties
			}
			id, err := memory.NewID(t0.Add(time.Duration(i*7919%200) * time.Millisecond)) // IDs not in creation order
			if err != nil {
				return err
			}
			m := memory.Memory{Kind: "note", Text: text, Session: "pod", CreatedAt: t0.Add(time.Duration(i%23) * time.Second)}
			if err := db.insertMemory(ctx, tx, ns, m, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []memory.Namespace{nsA, nsB} {
		for _, limit := range []int{1, 3, 10, 20, 50} {
			q := memory.Query{Text: "cafe", Limit: limit}
			want := exactRecall(t, db, ns, q)
			got, ok, err := db.recallFast(ctx, ns, q, ftsQuery(q.Text))
			if err != nil {
				t.Fatal(err)
			}
			if ids := memIDList(got); ok && !slices.Equal(ids, want) {
				t.Errorf("recallFast(%s, limit %d) = %v, want %v", ns.Agent, limit, ids, want)
			}
			all, err := db.RecallMemories(ctx, ns, q)
			if err != nil {
				t.Fatal(err)
			}
			if ids := memIDList(all); !slices.Equal(ids, want) {
				t.Errorf("RecallMemories(%s, limit %d) = %v, want %v", ns.Agent, limit, ids, want)
			}
		}
	}
}

// TestRecallBoundKeepsTheNewest: a query matching more than recallCap
// memories of the namespace ranks its newest recallCap matches, so a
// strong match written before them drops out and one written after
// them is found (the bound, as documented on recallCap).
func TestRecallBoundKeepsTheNewest(t *testing.T) {
	db := openSignerTestDB(t, t.TempDir())
	ctx := context.Background()
	texts := []string{"prefers prefers prefers alpha"}
	for i := range recallCap + 5 {
		texts = append(texts, fmt.Sprintf("the user prefers tea number %d", i))
	}
	texts = append(texts, "prefers prefers prefers omega")
	insertInOrder(t, db, texts)
	got, err := db.RecallMemories(ctx, nsA, memory.Query{Text: "prefers", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Text != "prefers prefers prefers omega" {
		t.Fatalf("recall = %v, want the newest strong match first", texts0(got))
	}
	for _, m := range got {
		if m.Text == "prefers prefers prefers alpha" {
			t.Fatalf("recall = %v: the oldest match is outside the newest %d and must not be ranked", texts0(got), recallCap)
		}
	}
}

func texts0(ms []memory.Memory) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

// TestRecallFastStopsAtTheCap: with exactly recallCap+1 matches, the
// fast path (which reads recallCap+1 of them to tell) gives no answer,
// so the one outside the newest recallCap, though the best, is not
// ranked, as with any larger count.
func TestRecallFastStopsAtTheCap(t *testing.T) {
	db := openSignerTestDB(t, t.TempDir())
	ctx := context.Background()
	texts := []string{"prefers prefers prefers alpha"}
	for i := range recallCap - 20 {
		texts = append(texts, fmt.Sprintf("the user prefers tea number %d", i))
	}
	for i := range 20 { // ranked between alpha and the rest, each its own score
		texts = append(texts, "prefers prefers "+strings.Repeat("tea ", i))
	}
	insertInOrder(t, db, texts)
	q := memory.Query{Text: "prefers", Limit: 3}
	if got, ok, err := db.recallFast(ctx, nsA, q, ftsQuery(q.Text)); err != nil || ok {
		t.Fatalf("recallFast = %v, %v, %v; want no answer over the cap", texts0(got), ok, err)
	}
	got, err := db.RecallMemories(ctx, nsA, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || slices.Contains(texts0(got), texts[0]) {
		t.Fatalf("recall = %v, want 3 of the newest %d matches", texts0(got), recallCap)
	}
}

// insertInOrder inserts texts into nsA in one transaction, text i with
// ID i+1, created i seconds after t0.
func insertInOrder(t *testing.T, db *DB, texts []string) {
	t.Helper()
	ctx := context.Background()
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for i, text := range texts {
			m := memory.Memory{Kind: "note", Text: text, Session: "s", CreatedAt: t0.Add(time.Duration(i) * time.Second)}
			if err := db.insertMemory(ctx, tx, nsA, m, int64(i+1)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
