package sqlite

// Attacks on the fast path of a keyword recall (recallFast): each
// compares whole memories from RecallMemories, and from recallFast when
// it claims an exact answer, with the exact statement (recallSQL) whose
// tags are decoded with json.Unmarshal (no shortcut for "[]").

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

// fastAttackExact is exactRecall returning full memories, tags decoded
// with json.Unmarshal (empty -> nil).
func fastAttackExact(t *testing.T, db *DB, ns memory.Namespace, q memory.Query) []memory.Memory {
	t.Helper()
	query, args := recallSQL(ns, q)
	if query == "" {
		return nil
	}
	rows, err := db.db.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []memory.Memory
	for rows.Next() {
		var r struct {
			id                             int64
			kind, key, text, tags, session string
			created                        int64
			supBy, supAt                   sql.NullInt64
		}
		if err := rows.Scan(&r.id, &r.kind, &r.key, &r.text, &r.tags, &r.session, &r.created, &r.supBy, &r.supAt); err != nil {
			t.Fatal(err)
		}
		m := memory.Memory{ID: memory.FormatID(r.id), Kind: r.kind, Key: r.key, Text: r.text, Session: r.session, CreatedAt: fromMillis(r.created)}
		if r.supBy.Valid {
			m.SupersededBy = memory.FormatID(r.supBy.Int64)
		}
		if r.supAt.Valid {
			m.SupersededAt = fromMillis(r.supAt.Int64)
		}
		if err := json.Unmarshal([]byte(r.tags), &m.Tags); err != nil {
			t.Fatalf("old decode %q: %v", r.tags, err)
		}
		if len(m.Tags) == 0 {
			m.Tags = nil
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func fastAttackInsert(t *testing.T, db *DB, ns memory.Namespace, id int64, m memory.Memory) {
	t.Helper()
	err := db.tx(context.Background(), func(tx *sql.Tx) error { return db.insertMemory(context.Background(), tx, ns, m, id) })
	if err != nil {
		t.Fatal(err)
	}
}

func fastAttackCheck(t *testing.T, db *DB, ns memory.Namespace, q memory.Query) (fastOK bool) {
	t.Helper()
	ctx := context.Background()
	got, err := db.RecallMemories(ctx, ns, q)
	if err != nil {
		t.Fatalf("RecallMemories(%v,%+v): %v", ns, q, err)
	}
	want := fastAttackExact(t, db, ns, q)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RecallMemories(%v,%+v)=\n%v\nwant\n%v", ns, q, memIDList(got), memIDList(want))
		for i := range min(len(got), len(want)) {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("  [%d] got %#v\n  want %#v", i, got[i], want[i])
				break
			}
		}
	}
	if match := ftsQuery(q.Text); match != "" {
		fast, ok, err := db.recallFast(ctx, ns, q, match)
		if err != nil {
			t.Fatal(err)
		}
		if ok && !reflect.DeepEqual(fast, want) {
			t.Errorf("recallFast(%v,%+v)=%v want %v", ns, q, memIDList(fast), memIDList(want))
		}
		return ok
	}
	return false
}

// TestAttackRecallFastRowidZero: a memory whose ID is 0 (not made by
// NewID or ParseID, but insertMemory accepts it) is returned like any
// other; the statement's "no candidate" row is a NULL rowid, not 0.
func TestAttackRecallFastRowidZero(t *testing.T) {
	db := openTestDB(t)
	for i, id := range []int64{0, 1, 2, -5, math.MaxInt64, math.MinInt64 + 1} {
		fastAttackInsert(t, db, nsA, id, memory.Memory{Kind: "note", Key: fmt.Sprintf("k%02d", i), Text: "zero hero", Session: "s", CreatedAt: t0.Add(time.Duration(i%2) * time.Millisecond)})
	}
	for l := 1; l <= 8; l++ {
		fastAttackCheck(t, db, nsA, memory.Query{Text: "hero", Limit: l})
	}
}

// TestAttackRecallFastRowidExtremes: negative and near-max IDs, ties, two namespaces.
func TestAttackRecallFastRowidExtremes(t *testing.T) {
	db := openTestDB(t)
	for i, id := range []int64{1, 2, -5, -1, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1} {
		fastAttackInsert(t, db, nsA, id, memory.Memory{Kind: "note", Key: fmt.Sprintf("k%02d", i), Text: "zero hero", Session: "s", CreatedAt: t0.Add(time.Duration(i%2) * time.Millisecond)})
		fastAttackInsert(t, db, nsB, id^0x100, memory.Memory{Kind: "note", Key: fmt.Sprintf("k%02d", i), Text: "zero hero", Session: "s", CreatedAt: t0})
	}
	for l := 1; l <= 12; l++ {
		fastAttackCheck(t, db, nsA, memory.Query{Text: "hero", Limit: l})
		fastAttackCheck(t, db, nsB, memory.Query{Text: "hero", Limit: l})
	}
}

// TestAttackRecallFastTagsVariants: tags JSON as stored by hand ("[ ]", "null", unicode).
func TestAttackRecallFastTagsVariants(t *testing.T) {
	db := openTestDB(t)
	variants := []string{`[]`, `[ ]`, `null`, ` []`, "[]\n", `["Ω","東京"]`, `[""]`, `["a","a"]`, `["\u00e9"]`, `[ "x" ]`}
	for i, tg := range variants {
		fastAttackInsert(t, db, nsA, int64(i+1), memory.Memory{Kind: "note", Text: fmt.Sprintf("tagged %d", i), Session: "s", CreatedAt: t0})
		if _, err := db.db.Exec(`UPDATE memories SET tags = ? WHERE id = ?`, tg, i+1); err != nil {
			t.Fatal(err)
		}
	}
	for l := 1; l <= 12; l++ {
		if !fastAttackCheck(t, db, nsA, memory.Query{Text: "tagged", Limit: l}) {
			t.Logf("limit %d: fast path not used", l)
		}
	}
}

// TestAttackRecallFastDifferential: random corpora with legacy random IDs, ties, kinds, history.
func TestAttackRecallFastDifferential(t *testing.T) {
	for seed := range 8 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 77))
			db := openTestDB(t)
			nss := []memory.Namespace{nsA, nsB, nsOtherTenant}
			kinds := []string{"note", "fact"}
			vocab := []string{"cafe", "tea", "alpha", "Ω", "東京"}
			seen := map[int64]bool{}
			var ids []int64
			err := db.tx(context.Background(), func(tx *sql.Tx) error {
				for i := range 100 + rng.IntN(300) {
					var id int64
					switch rng.IntN(3) {
					case 0:
						id = rng.Int64() // legacy random
					case 1:
						id = math.MaxInt64 - rng.Int64N(1000)
					default:
						id, _ = memory.NewID(t0.Add(time.Duration(rng.IntN(50)) * time.Millisecond))
					}
					if seen[id] || id == 0 {
						continue
					}
					seen[id] = true
					ids = append(ids, id)
					text := "cafe tea"
					if rng.IntN(2) == 0 {
						var w []string
						for range 1 + rng.IntN(4) {
							w = append(w, vocab[rng.IntN(len(vocab))])
						}
						text = strings.Join(w, " ")
					}
					var tags []string
					if rng.IntN(3) == 0 {
						tags = []string{"東京", "t"}
					}
					m := memory.Memory{Kind: kinds[rng.IntN(2)], Key: fmt.Sprintf("u%d", i), Text: text, Tags: tags, Session: "s",
						CreatedAt: t0.Add(time.Duration(rng.IntN(3)) * time.Millisecond)}
					if err := db.insertMemory(context.Background(), tx, nss[rng.IntN(3)], m, id); err != nil {
						return err
					}
				}
				for _, id := range ids {
					if rng.IntN(5) == 0 {
						if _, err := tx.Exec(`UPDATE memories SET superseded_by = ?, superseded_at = ? WHERE id = ?`, ids[rng.IntN(len(ids))], millis(t0), id); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			fast := 0
			for _, text := range []string{"cafe", "tea", "cafe tea", "alpha", "Ω", "東京", "t", "nomatch", "alpha Ω"} {
				for _, ns := range []memory.Namespace{nsA, nsB, nsOtherTenant, {Tenant: "nobody", Agent: "x"}} {
					for _, l := range []int{1, 2, 3, 5, 10, 37, 100} {
						for _, k := range []string{"", "note"} {
							for _, h := range []bool{false, true} {
								if fastAttackCheck(t, db, ns, memory.Query{Text: text, Limit: l, Kind: k, History: h}) {
									fast++
								}
							}
						}
					}
				}
			}
			t.Logf("fast answered %d", fast)
		})
	}
}

// TestAttackRecallFastCapBoundary: exactly recallCap and recallCap+1 matches, split across namespaces.
func TestAttackRecallFastCapBoundary(t *testing.T) {
	for _, total := range []int{recallCap, recallCap + 1} {
		t.Run(fmt.Sprint(total), func(t *testing.T) {
			db := openTestDB(t)
			err := db.tx(context.Background(), func(tx *sql.Tx) error {
				for i := range total {
					ns := nsA
					if i%3 == 0 {
						ns = nsB
					}
					text := "bound word"
					if i%97 == 0 {
						text = "bound bound bound"
					}
					m := memory.Memory{Kind: "note", Key: fmt.Sprintf("k%05d", i), Text: text, Session: "s", CreatedAt: t0.Add(time.Duration(i%5) * time.Millisecond)}
					if err := db.insertMemory(context.Background(), tx, ns, m, int64(i+1)*7919); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []int{1, 5, 20, 21, 22, 23, 100} {
				for _, ns := range []memory.Namespace{nsA, nsB, nsOtherTenant} {
					ok := fastAttackCheck(t, db, ns, memory.Query{Text: "bound", Limit: l})
					if total > recallCap && ok {
						t.Errorf("fast answered over the cap")
					}
				}
			}
		})
	}
}

var _ = slices.Equal[[]int]

// TestAttackRecallFastOddLimits: limits 0, negative and above 100.
func TestAttackRecallFastOddLimits(t *testing.T) {
	db := openTestDB(t)
	err := db.tx(context.Background(), func(tx *sql.Tx) error {
		for i := range 300 {
			ns := []memory.Namespace{nsA, nsB}[i%2]
			m := memory.Memory{Kind: "note", Key: fmt.Sprintf("k%03d", i), Text: strings.Repeat("odd ", 1+i%4) + "limit", Session: "s", CreatedAt: t0.Add(time.Duration(i%3) * time.Millisecond)}
			if err := db.insertMemory(context.Background(), tx, ns, m, int64(i*31+5)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []int{0, -1, -7, 101, 150, 151, 1000} {
		for _, ns := range []memory.Namespace{nsA, nsB, nsOtherTenant} {
			fastAttackCheck(t, db, ns, memory.Query{Text: "odd", Limit: l})
			fastAttackCheck(t, db, ns, memory.Query{Text: "odd limit", Limit: l, History: true})
		}
	}
}
