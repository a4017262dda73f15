package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

const benchCorpus = 100_000

// The corpus vocabulary is Zipf-distributed, as in real text: function
// words first (in most memories), then content words spread among 30000
// generated ones (each in a few hundred memories or fewer).
var (
	benchFunctionWords = strings.Fields(`the a to of and in for with on is that this it be at by from or as we
		user should has was will can after before not when uses prefers`)
	benchContentWords = strings.Fields(`
deploy cluster namespace pod service config test build release branch commit
review merge error retry timeout latency cache database index query schema
migration backup restore token key secret rotate expire lease epoch version
python golang rust typescript java kotlin swift ruby elixir haskell
postgres sqlite redis kafka nginx envoy istio helm kustomize terraform
monday tuesday wednesday thursday friday weekend morning evening deadline
alice bob carol dave erin frank grace heidi ivan judy mallory oscar peggy
dark light theme font editor vim emacs vscode terminal shell zsh bash
coffee tea lunch meeting standup retro planning sprint ticket bug feature
customer invoice payment refund order shipping warehouse inventory supplier
report dashboard metric alert incident outage postmortem oncall pager runbook
london paris berlin tokyo madrid rome vienna prague oslo helsinki dublin
budget forecast quarter revenue margin hiring onboarding offboarding laptop
likes dislikes avoids wants needs asked decided agreed rejected
always never usually sometimes during because although unless
small large fast slow stable flaky broken fixed pending blocked done
spreadsheet document slide diagram notebook wiki readme changelog roadmap`)
	benchVocab = buildVocab(30000)
)

func buildVocab(n int) []string {
	syl := strings.Fields("ka lo mi ne ru sa ti vo pe da gu ri zo fa le no be ki mu ta")
	v := slices.Clone(benchFunctionWords)
	content := slices.Clone(benchContentWords)
	for i := 0; len(v) < n; i++ {
		if i%8 == 0 && len(content) > 0 {
			v, content = append(v, content[0]), content[1:]
			continue
		}
		w := ""
		for k := i; ; k /= len(syl) {
			w += syl[k%len(syl)]
			if k < len(syl) {
				break
			}
		}
		v = append(v, w+"n")
	}
	return v
}

// benchExtras are non-English memories mixed into the corpus.
var benchExtras = []string{
	"用户喜欢深色主题和简洁的界面", "明天上午十点开会讨论发布计划", "你好世界，这是一个测试",
	"Пользователь предпочитает тёмную тему", "Встреча перенесена на пятницу",
	"café au lait every morning at the crêperie", "naïve résumé parsing in the façade service",
	"東京のオフィスで金曜日にデプロイする", "세계 최고의 커피를 좋아합니다", "ship it 🚀 after the 🎉 party",
}

func benchText(r *rand.Rand, z *rand.Zipf, i int) string {
	if i%50 == 0 {
		return fmt.Sprintf("%s (%d)", benchExtras[r.IntN(len(benchExtras))], i)
	}
	n := 8 + r.IntN(32)
	words := make([]string, n)
	for j := range words {
		words[j] = benchVocab[z.Uint64()]
	}
	if r.IntN(4) == 0 {
		words = append(words, fmt.Sprintf("ticket-%d", r.IntN(20000)))
	}
	return strings.Join(words, " ")
}

// buildCorpus fills ns of a fresh database with n varied memories in one
// transaction and returns the database and a random source for more text.
func buildCorpus(b *testing.B, n int) (*DB, *rand.Rand, *rand.Zipf) {
	b.Helper()
	db := openTestDB(b)
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.07, 2, uint64(len(benchVocab)-1))
	ctx := context.Background()
	start := time.Now()
	seen := make(map[string]bool, n)
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for i := 0; len(seen) < n; i++ {
			text := benchText(r, z, i)
			if seen[text] {
				continue
			}
			seen[text] = true
			m := memory.Memory{
				Kind: []string{"fact", "preference", "decision", "note"}[r.IntN(4)], Text: text,
				Session: "pod-bench", CreatedAt: t0.Add(time.Duration(i) * time.Second),
			}
			if i%10 == 0 {
				m.Key = fmt.Sprintf("topic-%d", i)
				m.Tags = []string{"imported", benchContentWords[r.IntN(len(benchContentWords))]}
			}
			id, err := newMemoryID()
			if err != nil {
				return err
			}
			if err := insertMemory(ctx, tx, nsA, m, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("build corpus: %v", err)
	}
	b.Logf("built a corpus of %d memories in %v", n, time.Since(start).Round(time.Millisecond))
	return db, r, z
}

func BenchmarkRemember(b *testing.B) {
	db, r, z := buildCorpus(b, benchCorpus)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		m := memory.Memory{Kind: "note", Text: fmt.Sprintf("%s #%d", benchText(r, z, 1), i), Session: "pod-bench", CreatedAt: time.Now()}
		if i%4 == 0 {
			m.Key = fmt.Sprintf("bench-key-%d", i%64) // supersedes an earlier one
		}
		if _, err := db.RememberMemory(ctx, nsA, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecall(b *testing.B) {
	db, _, _ := buildCorpus(b, benchCorpus)
	ctx := context.Background()
	queries := []memory.Query{
		{Text: "postgres migration"},
		{Text: "dark theme editor"},
		{Text: "alice deadline friday"},
		{Text: "ticket-1234"},
		{Text: "outage postmortem runbook", Kind: "decision"},
		{Text: "世界"},
		{Text: "cafe"},
		{Text: "тему"},
		{Text: "kubernetes"}, // in no memory
		{Text: "the user prefers"},
		{Text: ""}, // newest
		{Text: "lease epoch", History: true},
	}
	// The floor: the bare FTS5 match, ranked by bm25, that every keyword
	// recall must run, without the tenant/agent filter and row fetch.
	floorQ, err := db.db.PrepareContext(ctx, `SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT 10`)
	if err != nil {
		b.Fatal(err)
	}
	defer floorQ.Close()
	var lat, floor []time.Duration
	per := make([][]time.Duration, len(queries))
	i := 0
	for b.Loop() {
		q := queries[i%len(queries)]
		q.Limit = 10
		start := time.Now()
		if _, err := db.RecallMemories(ctx, nsA, q); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		lat = append(lat, d)
		per[i%len(queries)] = append(per[i%len(queries)], d)
		if m := ftsQuery(q.Text); m != "" {
			start = time.Now()
			rows, err := floorQ.QueryContext(ctx, m)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
			floor = append(floor, time.Since(start))
		}
		i++
	}
	var report strings.Builder
	for j, ds := range per {
		if len(ds) > 0 {
			slices.Sort(ds)
			fmt.Fprintf(&report, " %q=%v", queries[j].Text, ds[len(ds)/2].Round(10*time.Microsecond))
		}
	}
	b.Logf("recall p50 by query:%s", report.String())
	b.Logf("%d memories in the index, %d recalls", benchCorpus, len(lat))
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	slices.Sort(floor)
	if len(floor) > 0 {
		f50 := float64(floor[len(floor)/2]) / float64(time.Millisecond)
		b.ReportMetric(f50, "floor-p50-ms")
		b.ReportMetric(pct(0.50)/f50, "p50-x-floor")
	}
}
