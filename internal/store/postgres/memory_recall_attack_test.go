package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/memory"
)

// oldRecallSQL is recallSQL before it ranked (id, created_at, rank)
// only (commit cd78e16): the reference of TestAttackRecallNarrowed.
func oldRecallSQL(ns memory.Namespace, q memory.Query) (string, []any) {
	var filter strings.Builder
	args := []any{ns.Tenant, ns.Agent}
	filter.WriteString(`tenant = $1 AND agent = $2`)
	if q.Kind != "" {
		args = append(args, q.Kind)
		fmt.Fprintf(&filter, ` AND kind = $%d`, len(args))
	}
	if !q.History {
		filter.WriteString(` AND superseded_by IS NULL`)
	}
	if strings.TrimSpace(q.Text) == "" {
		args = append(args, q.Limit)
		return fmt.Sprintf(`SELECT %s FROM memories WHERE %s ORDER BY created_at DESC, id DESC LIMIT $%d`,
			memoryColumns, filter.String(), len(args)), args
	}
	tsq := memoryQuery(q.Text)
	if tsq == "" {
		return "", nil
	}
	args = append(args, tsq, q.Limit)
	qi, li := len(args)-1, len(args)
	return fmt.Sprintf(`SELECT %s FROM (
			SELECT %s, terms FROM memories WHERE %s AND terms @@ $%d::tsquery LIMIT %d
		) m
		ORDER BY ts_rank(terms, $%d::tsquery) DESC, created_at DESC, id DESC LIMIT $%d`,
		memoryColumns, memoryColumns, filter.String(), qi, recallCap, qi, li), args
}

var attackVocab = []string{"cafe", "tea", "user", "prefers", "alpha", "beta", "Ω", "naïve", "東京", "x"}

// TestAttackRecallNarrowed: random corpora over three namespaces of two
// tenants, kinds, superseded memories and ties; every recall equals the
// statement before the ranking was narrowed, and returns only its
// namespace's memories.
func TestAttackRecallNarrowed(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	nss := []memory.Namespace{{Tenant: "agents", Agent: "run-1"}, {Tenant: "agents", Agent: "run-2"}, {Tenant: "others", Agent: "run-1"}}
	kinds := []string{"note", "fact", "pref"}
	owner := map[string]memory.Namespace{}
	t0 := time.Date(2026, 10, 12, 9, 0, 0, 0, time.UTC)
	err := db.tx(ctx, func(tx pgx.Tx) error {
		for i := range 600 {
			ns := nss[rng.IntN(len(nss))]
			var words []string
			for range 1 + rng.IntN(5) {
				words = append(words, attackVocab[rng.IntN(len(attackVocab))])
			}
			text := strings.Join(words, " ")
			if rng.IntN(3) == 0 {
				text = "cafe tea"
			}
			created := t0.Add(time.Duration(rng.IntN(10)) * time.Millisecond)
			id, err := memory.NewID(t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond))
			if err != nil {
				return err
			}
			if _, dup := owner[memory.FormatID(id)]; dup {
				continue
			}
			m := memory.Memory{Kind: kinds[rng.IntN(len(kinds))], Key: fmt.Sprintf("d%d", i), Text: text, Session: "pod", CreatedAt: created}
			if err := insertMemory(ctx, tx, ns, m, id); err != nil {
				return err
			}
			if rng.IntN(4) == 0 {
				if _, err := tx.Exec(ctx, `UPDATE memories SET superseded_by = 1, superseded_at = now() WHERE id = $1`, id); err != nil {
					return err
				}
			}
			owner[memory.FormatID(id)] = ns
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(query string, args []any) []string {
		rows, err := db.pool.Query(ctx, query, args...)
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
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	queries := []string{"", "cafe", "tea cafe", "Ω", "東京", "naïve x", `"`, `cafe & tea`, `!cafe`, `cafe:*`, `'a' | 'b'`, `(cafe)`, "cafe\\ tea"}
	for range 20 {
		queries = append(queries, attackVocab[rng.IntN(len(attackVocab))]+" "+attackVocab[rng.IntN(len(attackVocab))])
	}
	for _, text := range queries {
		for range 8 {
			ns := nss[rng.IntN(len(nss))]
			q := memory.Query{Text: text, Limit: 1 + rng.IntN(100), History: rng.IntN(3) == 0}
			if rng.IntN(3) == 0 {
				q.Kind = kinds[rng.IntN(len(kinds))]
			}
			got, err := db.RecallMemories(ctx, ns, q)
			if err != nil {
				t.Fatalf("RecallMemories(%v, %+v) = %v", ns, q, err)
			}
			var want []string
			if query, args := oldRecallSQL(ns, q); query != "" {
				want = run(query, args)
			}
			if ids := memIDs(got); !slices.Equal(ids, want) {
				t.Errorf("RecallMemories(%v, %+v) = %v, want %v", ns, q, ids, want)
			}
			for _, m := range got {
				if owner[m.ID] != ns {
					t.Errorf("RecallMemories(%v, %+v) returned %s of %v", ns, q, m.ID, owner[m.ID])
				}
				if m.SupersededBy != "" && !q.History {
					t.Errorf("RecallMemories(%v, %+v) returned superseded %s", ns, q, m.ID)
				}
			}
		}
	}
}

func memIDs(ms []memory.Memory) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}
