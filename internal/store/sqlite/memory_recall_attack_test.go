package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

// nsOtherTenant has the agent name of nsA under another tenant.
var nsOtherTenant = memory.Namespace{Tenant: "others", Agent: "run-1"}

// attackVocab is small so that texts repeat and scores tie.
var attackVocab = []string{"cafe", "tea", "user", "prefers", "alpha", "beta", "gamma", "Ω", "naïve", "東京", "x"}

// attackQueries include FTS5 syntax, which ftsQuery must quote.
var attackQueries = []string{
	`"`, `""`, `*`, `cafe*`, `NEAR(cafe tea)`, `cafe AND tea`, `cafe OR tea`, `NOT cafe`, `-cafe`, `^cafe`,
	`text:cafe`, `meta:cafe`, `{text meta}:cafe`, `cafe + tea`, `(cafe)`, `cafe"tea`, `東京`, `NAÏVE`, `Ω Ω`,
	`k1`, `k2 tag1`, `tag2`, "cafe\x00tea", `' OR 1=1 --`,
}

// TestAttackRecallDifferential: random corpora over three namespaces
// (two of one tenant, and one of another tenant with an agent name of the
// first), kinds, keys superseded, duplicate texts and equal creation
// times; every recall of the store equals recallSQL run alone (exact:
// no namespace has recallCap matches), and returns only memories of its
// namespace, active ones unless History.
func TestAttackRecallDifferential(t *testing.T) {
	seeds := 12
	if v, err := strconv.Atoi(os.Getenv("ATTACK_SEEDS")); err == nil {
		seeds = v
	}
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			attackDifferential(t, uint64(seed))
		})
	}
}

type attackRow struct {
	ns         memory.Namespace
	kind       string
	superseded bool
}

func attackDifferential(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	db := openTestDB(t)
	ctx := context.Background()
	nss := []memory.Namespace{nsA, nsB, nsOtherTenant}
	kinds := []string{"note", "fact", "pref"}
	n := 50 + rng.IntN(400)
	rows := map[string]attackRow{}
	// Unique (ns, kind, key) of active memories, as a remember keeps them.
	active := map[string]int64{}
	activeHash := map[string]int64{}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for i := range n {
			ns := nss[rng.IntN(len(nss))]
			if rng.IntN(4) == 0 { // skew: one namespace holds most
				ns = nsB
			}
			kind := kinds[rng.IntN(len(kinds))]
			var words []string
			for range 1 + rng.IntN(6) {
				words = append(words, attackVocab[rng.IntN(len(attackVocab))])
			}
			text := strings.Join(words, " ")
			if rng.IntN(3) == 0 {
				text = "cafe tea" // many exact duplicates: ties
			}
			key := ""
			if rng.IntN(3) == 0 {
				key = fmt.Sprintf("k%d", rng.IntN(3))
			}
			var tags []string
			if rng.IntN(4) == 0 {
				tags = []string{fmt.Sprintf("tag%d", rng.IntN(3))}
			}
			// Creation times: few distinct values (ties on created_at),
			// IDs in creation order or not.
			created := t0.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
			idAt := created
			if rng.IntN(2) == 0 {
				idAt = t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
			}
			id, err := memory.NewID(idAt)
			if err != nil {
				return err
			}
			if _, taken := rows[memory.FormatID(id)]; taken {
				continue
			}
			hk := ns.Tenant + "/" + ns.Agent + "/" + string(memory.ContentHash(kind, key, text))
			if old, dup := activeHash[hk]; dup {
				if rng.IntN(2) == 0 || key != "" {
					key = fmt.Sprintf("d%d", i) // same length: still a tie
					hk = ns.Tenant + "/" + ns.Agent + "/" + string(memory.ContentHash(kind, key, text))
				} else {
					if _, err := tx.Exec(`UPDATE memories SET superseded_by = ?, superseded_at = ? WHERE id = ?`, id, millis(created), old); err != nil {
						return err
					}
					r := rows[memory.FormatID(old)]
					r.superseded = true
					rows[memory.FormatID(old)] = r
				}
			}
			activeHash[hk] = id
			m := memory.Memory{Kind: kind, Key: key, Text: text, Tags: tags, Session: "pod", CreatedAt: created}
			ak := ns.Tenant + "/" + ns.Agent + "/" + kind + "/" + key
			if key != "" {
				if old, ok := active[ak]; ok {
					if _, err := tx.Exec(`UPDATE memories SET superseded_by = ?, superseded_at = ? WHERE id = ?`, id, millis(created), old); err != nil {
						return err
					}
					r := rows[memory.FormatID(old)]
					r.superseded = true
					rows[memory.FormatID(old)] = r
					for h, hid := range activeHash {
						if hid == old {
							delete(activeHash, h)
						}
					}
				}
				active[ak] = id
			}
			if err := db.insertMemory(ctx, tx, ns, m, id); err != nil {
				return fmt.Errorf("insert %d: %w", i, err)
			}
			rows[memory.FormatID(id)] = attackRow{ns: ns, kind: kind}
		}
		// Forget a few (the FTS entry goes too).
		for id := range rows {
			if rng.IntN(20) == 0 {
				raw, _ := memory.ParseID(id)
				if _, err := tx.Exec(sqlForget, raw, rows[id].ns.Tenant, rows[id].ns.Agent); err != nil {
					return err
				}
				if _, err := tx.Exec(sqlForgetFTS, raw); err != nil {
					return err
				}
				delete(rows, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	queries := slices.Clone(attackQueries)
	for range 30 {
		var words []string
		for range 1 + rng.IntN(3) {
			words = append(words, attackVocab[rng.IntN(len(attackVocab))])
		}
		queries = append(queries, strings.Join(words, " "))
	}
	checks, fastOK := 0, 0
	for _, text := range queries {
		for range 4 {
			ns := nss[rng.IntN(len(nss))]
			q := memory.Query{Text: text, Limit: 1 + rng.IntN(100), History: rng.IntN(3) == 0}
			if rng.IntN(5) == 0 {
				q.Limit = 1 + rng.IntN(5)
			}
			if rng.IntN(3) == 0 {
				q.Kind = kinds[rng.IntN(len(kinds))]
			}
			got, err := db.RecallMemories(ctx, ns, q)
			if err != nil {
				t.Fatalf("RecallMemories(%v, %+v) = %v", ns, q, err)
			}
			var want []string
			if query, _ := recallSQL(ns, q); query != "" {
				want = exactRecall(t, db, ns, q)
			}
			if ids := memIDList(got); !slices.Equal(ids, want) {
				t.Errorf("RecallMemories(%v, %+v) = %v, want %v", ns, q, ids, want)
			}
			if match := ftsQuery(q.Text); match != "" {
				fast, ok, err := db.recallFast(ctx, ns, q, match)
				if err != nil {
					t.Fatalf("recallFast(%v, %+v) = %v", ns, q, err)
				}
				if ok {
					fastOK++
				}
				if ids := memIDList(fast); ok && !slices.Equal(ids, want) {
					t.Errorf("recallFast(%v, %+v) = %v, want %v", ns, q, ids, want)
				}
			}
			for _, m := range got {
				r, ok := rows[m.ID]
				switch {
				case !ok:
					t.Errorf("RecallMemories(%v, %+v) returned unknown or forgotten %s", ns, q, m.ID)
				case r.ns != ns:
					t.Errorf("RecallMemories(%v, %+v) returned %s of %v", ns, q, m.ID, r.ns)
				case r.superseded && !q.History:
					t.Errorf("RecallMemories(%v, %+v) returned superseded %s", ns, q, m.ID)
				case q.Kind != "" && r.kind != q.Kind:
					t.Errorf("RecallMemories(%v, %+v) returned %s of kind %s", ns, q, m.ID, r.kind)
				}
			}
			checks++
		}
	}
	t.Logf("%d memories, %d recalls checked, %d answered by the fast path", len(rows), checks, fastOK)
}

// TestAttackRecallBoundAfterUpgrade: a database written before IDs
// carried the time holds random IDs. The bound of a broad query walks
// rowids from the top, so new IDs must sort above most old ones: with
// recallCap+200 old matches (uniform over the range, as the old
// memory.NewID made them), a memory remembered now, the newest and best
// match, is still among those ranked (memory.NewID puts new IDs in the
// top eighth of the range, above seven in eight old ones).
func TestAttackRecallBoundAfterUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts over 2000 memories")
	}
	db := openTestDB(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	old := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for i := 0; i < recallCap+200; {
			id := int64(rng.Uint64() >> 1) // as the old memory.NewID made them
			m := memory.Memory{Kind: "note", Text: fmt.Sprintf("the user prefers tea number %d", i), Session: "s", CreatedAt: old.Add(time.Duration(i) * time.Second)}
			if err := db.insertMemory(ctx, tx, nsA, m, id); err != nil {
				return err
			}
			i++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := db.RememberMemory(ctx, nsA, memory.Memory{Kind: "note", Text: "prefers prefers prefers coffee now", Session: "s", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.RecallMemories(ctx, nsA, memory.Query{Text: "prefers", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].ID != fresh.ID {
		t.Errorf("RecallMemories(prefers) = %q, want the newest and best match %q first", texts0(got), fresh.Memory.Text)
	}
}
