package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

// MemoryCorpus generates memories for benchmarks, the same ones for every
// store so that their numbers compare. Its vocabulary is Zipf-distributed,
// as in real text: function words first (in most memories), then content
// words spread among 30000 generated ones (each in a few hundred memories
// or fewer); one memory in 50 is in another script (Chinese, Russian,
// French, Japanese, Korean, emoji). It is not safe for concurrent use.
type MemoryCorpus struct {
	r *rand.Rand
	z *rand.Zipf
}

// NewMemoryCorpus returns a corpus with a fixed seed.
func NewMemoryCorpus() *MemoryCorpus {
	r := rand.New(rand.NewPCG(1, 2))
	return &MemoryCorpus{r: r, z: rand.NewZipf(r, 1.07, 2, uint64(len(corpusVocab)-1))}
}

var (
	corpusFunctionWords = strings.Fields(`the a to of and in for with on is that this it be at by from or as we
		user should has was will can after before not when uses prefers`)
	corpusContentWords = strings.Fields(`
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
	corpusVocab = corpusBuildVocab(30000)
	// corpusExtras are the memories in other scripts.
	corpusExtras = []string{
		"用户喜欢深色主题和简洁的界面", "明天上午十点开会讨论发布计划", "你好世界，这是一个测试",
		"Пользователь предпочитает тёмную тему", "Встреча перенесена на пятницу",
		"café au lait every morning at the crêperie", "naïve résumé parsing in the façade service",
		"東京のオフィスで金曜日にデプロイする", "세계 최고의 커피를 좋아합니다", "ship it 🚀 after the 🎉 party",
	}
)

func corpusBuildVocab(n int) []string {
	syl := strings.Fields("ka lo mi ne ru sa ti vo pe da gu ri zo fa le no be ki mu ta")
	v := slices.Clone(corpusFunctionWords)
	content := slices.Clone(corpusContentWords)
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

// Text returns the text of memory i: 8 to 39 words, sometimes with a
// "ticket-N" reference, or every 50th a text in another script.
func (c *MemoryCorpus) Text(i int) string {
	if i%50 == 0 {
		return fmt.Sprintf("%s (%d)", corpusExtras[c.r.IntN(len(corpusExtras))], i)
	}
	n := 8 + c.r.IntN(32)
	words := make([]string, n)
	for j := range words {
		words[j] = corpusVocab[c.z.Uint64()]
	}
	if c.r.IntN(4) == 0 {
		words = append(words, fmt.Sprintf("ticket-%d", c.r.IntN(20000)))
	}
	return strings.Join(words, " ")
}

// Memories returns n memories with distinct texts, created a second apart
// from start by session pod-bench, of four kinds; one in ten has a key
// and two tags.
func (c *MemoryCorpus) Memories(n int, start time.Time) []memory.Memory {
	out := make([]memory.Memory, 0, n)
	seen := make(map[string]bool, n)
	for i := 0; len(out) < n; i++ {
		text := c.Text(i)
		if seen[text] {
			continue
		}
		seen[text] = true
		m := memory.Memory{
			Kind: []string{"fact", "preference", "decision", "note"}[c.r.IntN(4)], Text: text,
			Session: "pod-bench", CreatedAt: start.Add(time.Duration(i) * time.Second),
		}
		if i%10 == 0 {
			m.Key = fmt.Sprintf("topic-%d", i)
			m.Tags = []string{"imported", corpusContentWords[c.r.IntN(len(corpusContentWords))]}
		}
		out = append(out, m)
	}
	return out
}

// RecallQueries returns the queries of the recall benchmarks (Limit
// unset): two- and three-word searches, a ticket number, a search
// restricted to a kind, CJK, a folded diacritic, Russian, a word in no
// memory, function words (in most memories), the newest memories, and a
// search of history.
func RecallQueries() []memory.Query {
	return []memory.Query{
		{Text: "postgres migration"},
		{Text: "dark theme editor"},
		{Text: "alice deadline friday"},
		{Text: "ticket-1234"},
		{Text: "outage postmortem runbook", Kind: "decision"},
		{Text: "世界"},
		{Text: "cafe"},
		{Text: "тему"},
		{Text: "kubernetes"},
		{Text: "the user prefers"},
		{Text: ""},
		{Text: "lease epoch", History: true},
	}
}

// ReportRecall logs the p50 and p99 of each query's latencies (per[i]
// for queries[i]) and reports, over all recalls (lat), the metrics of
// ReportLatency against the floor latencies measured in the same run,
// and max-query-p99-ms: the p99 of the slowest query (the one matching
// most memories). It sorts the slices it is given.
func ReportRecall(b *testing.B, queries []memory.Query, per [][]time.Duration, lat, floor []time.Duration, corpus int) {
	b.Helper()
	var (
		report strings.Builder
		worst  float64
	)
	for j, ds := range per {
		if len(ds) > 0 {
			p50, p99 := percentile(ds, 0.50), percentile(ds, 0.99)
			worst = max(worst, p99)
			fmt.Fprintf(&report, " %q=%.2f/%.2f", queries[j].Text, p50, p99)
		}
	}
	b.Logf("recall p50/p99 ms by query:%s", report.String())
	b.Logf("%d memories in the index, %d recalls", corpus, len(lat))
	if len(lat) == 0 {
		return
	}
	ReportLatency(b, lat, floor)
	b.ReportMetric(worst, "max-query-p99-ms")
}
