package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

// Memory runs the conformance suite of [memory.Store]. Each subtest calls
// open for a new, empty store, which open closes when the test that it is
// given ends. Subtests run in parallel with each other; some of them call
// the store from many goroutines at once.
//
// The suite checks the contract's rules (dedup, supersede with history,
// one active memory per kind and key, recall filters and order, leases
// and epochs, fencing, version checks, [memory.HolderKey]), that texts and
// values come back byte for byte and times at millisecond resolution in
// UTC, that recall finds text through case and diacritics, CJK and emoji
// and never reads the query as search syntax, and that concurrent calls
// are atomic. Of the ranking it checks only what every store must agree
// on: a memory that matches all terms comes before one that matches one,
// equal matches come newest first, and so does an empty query. The Race
// subtests run the checks of [MemoryReplicas] with one handle.
func Memory(t *testing.T, open func(testing.TB) memory.Store) {
	tests := []struct {
		name string
		f    func(*testing.T, memory.Store)
	}{
		{"RememberStatuses", testRememberStatuses},
		{"RememberRoundTrip", testRememberRoundTrip},
		{"RememberIgnoresTags", testRememberIgnoresTags},
		{"SupersedeKeepsHistory", testSupersedeKeepsHistory},
		{"Forget", testForget},
		{"RecallFilters", testRecallFilters},
		{"RecallNewestFirst", testRecallNewestFirst},
		{"RecallRanking", testRecallRanking},
		{"RecallText", testRecallText},
		{"RecallSyntaxNotInterpreted", testRecallSyntaxNotInterpreted},
		{"RecallOtherNamespaceRanksFirst", testRecallOtherNamespaceRanksFirst},
		{"StateLifecycle", testStateLifecycle},
		{"LeaseEpochs", testLeaseEpochs},
		{"LeaseHolderKey", testLeaseHolderKey},
		{"ReleaseLease", testReleaseLease},
		{"PutFencing", testPutFencing},
		{"Attack10StateSlotVariants", testAttack10StateSlotVariants},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.f(t, open(t))
		})
	}
	for _, r := range memoryRaces {
		t.Run("Race"+r.name, func(t *testing.T) {
			t.Parallel()
			r.f(t, memNSA, []memory.Store{open(t)})
		})
	}
}

var (
	memNSA = memory.Namespace{Tenant: "agents", Agent: "run-1"}
	memNSB = memory.Namespace{Tenant: "agents", Agent: "run-2"}
	// memNSJoined joins its tenant and agent into the same string as memNSA.
	memNSJoined = memory.Namespace{Tenant: "agentsrun-", Agent: "1"}
	memT0       = time.Date(2026, 10, 12, 9, 0, 0, 0, time.UTC)
)

func newMem(kind, key, text string, at time.Time) memory.Memory {
	return memory.Memory{Kind: kind, Key: key, Text: text, Session: "pod-1", CreatedAt: at}
}

// memHolder is the kubernetes identity of pod session in memNSA.
func memHolder(session string) apikey.Identity {
	return apikey.Identity{Tenant: memNSA.Tenant, Agent: memNSA.Agent, Session: session, Method: "kubernetes", PodUID: "uid-" + session}
}

func memRemember(t *testing.T, s memory.Store, ns memory.Namespace, m memory.Memory) memory.Remembered {
	t.Helper()
	r, err := s.RememberMemory(context.Background(), ns, m)
	if err != nil {
		t.Fatalf("RememberMemory(%q) = %v", m.Text, err)
	}
	return r
}

func memRecall(t *testing.T, s memory.Store, ns memory.Namespace, q memory.Query) []memory.Memory {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	got, err := s.RecallMemories(context.Background(), ns, q)
	if err != nil {
		t.Fatalf("RecallMemories(%+v) = %v", q, err)
	}
	return got
}

func memIDs(ms []memory.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func testRememberStatuses(t *testing.T, s memory.Store) {
	ctx := context.Background()
	first := memRemember(t, s, memNSA, newMem("preference", "color", "blue", memT0))
	if first.Status != memory.StatusCreated || first.ID == "" || first.Memory.ID != first.ID {
		t.Fatalf("RememberMemory(blue) = %+v, want created with an ID", first)
	}
	steps := []struct {
		name       string
		ns         memory.Namespace
		m          memory.Memory
		want       memory.Status
		supersedes string
	}{
		{"same again is unchanged", memNSA, newMem("preference", "color", "blue", memT0.Add(time.Second)), memory.StatusUnchanged, ""},
		{"other namespace is separate", memNSB, newMem("preference", "color", "blue", memT0), memory.StatusCreated, ""},
		{"joined namespace is separate", memNSJoined, newMem("preference", "color", "blue", memT0), memory.StatusCreated, ""},
		{"other kind is separate", memNSA, newMem("fact", "color", "blue", memT0), memory.StatusCreated, ""},
		{"other key is separate", memNSA, newMem("preference", "colour", "blue", memT0), memory.StatusCreated, ""},
		{"new text supersedes", memNSA, newMem("preference", "color", "red", memT0.Add(2*time.Second)), memory.StatusSuperseded, first.ID},
		{"keyless", memNSA, newMem("fact", "", "sky is blue", memT0), memory.StatusCreated, ""},
		{"keyless duplicate", memNSA, newMem("fact", "", "sky is blue", memT0), memory.StatusUnchanged, ""},
		{"keyless never supersedes", memNSA, newMem("fact", "", "sky is grey", memT0), memory.StatusCreated, ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, err := s.RememberMemory(ctx, st.ns, st.m)
			if err != nil {
				t.Fatalf("RememberMemory(%q) = %v", st.m.Text, err)
			}
			if got.Status != st.want || got.Supersedes != st.supersedes {
				t.Errorf("RememberMemory(%q) = %s supersedes %q, want %s supersedes %q", st.m.Text, got.Status, got.Supersedes, st.want, st.supersedes)
			}
			if st.want == memory.StatusUnchanged && (got.ID != got.Memory.ID || got.Memory.Text != st.m.Text) {
				t.Errorf("RememberMemory(%q) unchanged = %+v, want the existing memory", st.m.Text, got)
			}
		})
	}
	// Going back to blue supersedes red with a new memory; history has all three.
	back := memRemember(t, s, memNSA, newMem("preference", "color", "blue", memT0.Add(3*time.Second)))
	if back.Status != memory.StatusSuperseded || back.ID == first.ID {
		t.Fatalf("RememberMemory(blue again) = %+v, want superseded with a new ID", back)
	}
	if all := memRecall(t, s, memNSA, memory.Query{Kind: "preference", History: true}); len(all) != 4 {
		t.Errorf("RecallMemories(history) = %d memories, want 4 (blue, red, blue again, colour)", len(all))
	}
	active := memRecall(t, s, memNSA, memory.Query{Kind: "preference"})
	if len(active) != 2 || active[0].ID != back.ID || active[1].Key != "colour" {
		t.Errorf("RecallMemories(active) = %+v, want %s (color) then the colour memory", active, back.ID)
	}
}

func testRememberRoundTrip(t *testing.T, s memory.Store) {
	zone := time.FixedZone("UTC+2", 2*60*60)
	at := memT0.Add(1500 * time.Microsecond).In(zone)
	texts := []string{
		"plain",
		"  leading and trailing spaces \r\n",
		"nul\x00byte and tab\t",
		"emoji 🎉 and 你好世界 and Привет",
		`quotes ' " \ and backslashes \\`,
	}
	for i, text := range texts {
		at := at.Add(time.Duration(i) * time.Second)
		m := memory.Memory{Kind: "fact", Key: fmt.Sprintf("k\x00%d", i), Text: text, Tags: []string{"b", "a", "b🎉"}, Session: "pod-7", CreatedAt: at}
		r := memRemember(t, s, memNSA, m)
		got := memRecall(t, s, memNSA, memory.Query{Kind: "fact"})[0]
		want := m
		want.ID = r.ID
		want.CreatedAt = at.Truncate(time.Millisecond).UTC()
		if !equalMemory(got, want) {
			t.Errorf("recalled %+v, want %+v", got, want)
		}
		if got.CreatedAt.Location() != time.UTC {
			t.Errorf("recalled CreatedAt %v, want it in UTC", got.CreatedAt)
		}
	}
	r := memRemember(t, s, memNSA, newMem("note", "", "no tags", memT0))
	if got := memRecall(t, s, memNSA, memory.Query{Kind: "note"}); len(got) != 1 || len(got[0].Tags) != 0 || got[0].ID != r.ID {
		t.Errorf("recalled %+v, want one memory without tags", got)
	}
}

func equalMemory(a, b memory.Memory) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Key == b.Key && a.Text == b.Text && slices.Equal(a.Tags, b.Tags) &&
		a.Session == b.Session && a.CreatedAt.Equal(b.CreatedAt) && a.SupersededBy == b.SupersededBy && a.SupersededAt.Equal(b.SupersededAt)
}

func testRememberIgnoresTags(t *testing.T, s memory.Store) {
	m := newMem("fact", "", "tagged", memT0)
	m.Tags = []string{"one"}
	first := memRemember(t, s, memNSA, m)
	m.Tags = []string{"two"}
	m.CreatedAt = memT0.Add(time.Minute)
	again := memRemember(t, s, memNSA, m)
	if again.Status != memory.StatusUnchanged || again.ID != first.ID || !slices.Equal(again.Memory.Tags, []string{"one"}) || !again.Memory.CreatedAt.Equal(memT0) {
		t.Errorf("RememberMemory(other tags) = %+v, want unchanged %s with tags [one] from %v", again, first.ID, memT0)
	}
}

func testSupersedeKeepsHistory(t *testing.T, s memory.Store) {
	ctx := context.Background()
	v1 := memRemember(t, s, memNSA, newMem("preference", "editor", "vim", memT0))
	v2 := memRemember(t, s, memNSA, newMem("preference", "editor", "emacs", memT0.Add(time.Second)))
	v3 := memRemember(t, s, memNSA, newMem("preference", "editor", "helix", memT0.Add(2*time.Second)))
	if v2.Supersedes != v1.ID || v3.Supersedes != v2.ID {
		t.Fatalf("supersedes = %q, %q, want %q, %q", v2.Supersedes, v3.Supersedes, v1.ID, v2.ID)
	}
	all := memRecall(t, s, memNSA, memory.Query{History: true})
	if got, want := memIDs(all), []string{v3.ID, v2.ID, v1.ID}; !slices.Equal(got, want) {
		t.Fatalf("RecallMemories(history) = %q, want %q", got, want)
	}
	if all[0].SupersededBy != "" || !all[0].SupersededAt.IsZero() {
		t.Errorf("active memory = %+v, want no SupersededBy/At", all[0])
	}
	for i, want := range []struct {
		by string
		at time.Time
	}{{v3.ID, memT0.Add(2 * time.Second)}, {v2.ID, memT0.Add(time.Second)}} {
		if m := all[i+1]; m.SupersededBy != want.by || !m.SupersededAt.Equal(want.at) || m.SupersededAt.Location() != time.UTC {
			t.Errorf("memory %s superseded by %q at %v, want %q at %v UTC", m.ID, m.SupersededBy, m.SupersededAt, want.by, want.at)
		}
	}
	// Text search reaches history only when asked.
	if got := memRecall(t, s, memNSA, memory.Query{Text: "vim"}); len(got) != 0 {
		t.Errorf("RecallMemories(vim) = %q, want none (superseded)", memIDs(got))
	}
	if got := memRecall(t, s, memNSA, memory.Query{Text: "vim", History: true}); !slices.Equal(memIDs(got), []string{v1.ID}) {
		t.Errorf("RecallMemories(vim, history) = %q, want [%s]", memIDs(got), v1.ID)
	}
	// Remembering an old value again supersedes with a new memory.
	v4 := memRemember(t, s, memNSA, newMem("preference", "editor", "vim", memT0.Add(3*time.Second)))
	if v4.Status != memory.StatusSuperseded || v4.Supersedes != v3.ID || v4.ID == v1.ID {
		t.Errorf("RememberMemory(vim again) = %+v, want a new memory superseding %s", v4, v3.ID)
	}
	// With the active memory forgotten, the key is free: the next one is created.
	if err := s.ForgetMemory(ctx, memNSA, v4.ID); err != nil {
		t.Fatal(err)
	}
	v5 := memRemember(t, s, memNSA, newMem("preference", "editor", "nano", memT0.Add(4*time.Second)))
	if v5.Status != memory.StatusCreated {
		t.Errorf("RememberMemory(nano after forget) = %s, want created", v5.Status)
	}
	if got := memRecall(t, s, memNSA, memory.Query{Kind: "preference"}); !slices.Equal(memIDs(got), []string{v5.ID}) {
		t.Errorf("active preferences = %q, want [%s]", memIDs(got), v5.ID)
	}
}

func testForget(t *testing.T, s memory.Store) {
	ctx := context.Background()
	r := memRemember(t, s, memNSA, newMem("fact", "", "forget me", memT0))
	keep := memRemember(t, s, memNSA, newMem("fact", "", "keep me", memT0))
	tests := []struct {
		name string
		ns   memory.Namespace
		id   string
		want error
	}{
		{"other namespace", memNSB, r.ID, memory.ErrNotFound},
		{"malformed", memNSA, "not-an-id", memory.ErrNotFound},
		{"empty", memNSA, "", memory.ErrNotFound},
		{"owner", memNSA, r.ID, nil},
		{"again", memNSA, r.ID, memory.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.ForgetMemory(ctx, tt.ns, tt.id); !errors.Is(err, tt.want) {
				t.Errorf("ForgetMemory(%v, %q) = %v, want %v", tt.ns, tt.id, err, tt.want)
			}
		})
	}
	if got := memRecall(t, s, memNSA, memory.Query{Text: "forget"}); len(got) != 0 {
		t.Errorf("RecallMemories(forget) = %q, want none (index entry deleted)", memIDs(got))
	}
	if got := memRecall(t, s, memNSA, memory.Query{History: true}); !slices.Equal(memIDs(got), []string{keep.ID}) {
		t.Errorf("RecallMemories(history) = %q, want [%s]", memIDs(got), keep.ID)
	}
	// Forgotten, the same text is new again.
	if again := memRemember(t, s, memNSA, newMem("fact", "", "forget me", memT0)); again.Status != memory.StatusCreated || again.ID == r.ID {
		t.Errorf("RememberMemory(forgotten text) = %+v, want created with a new ID", again)
	}
}

func testRecallFilters(t *testing.T, s memory.Store) {
	var facts, notes []string
	for i := range 5 {
		facts = append(facts, memRemember(t, s, memNSA, newMem("fact", "", fmt.Sprintf("shared word fact %d", i), memT0.Add(time.Duration(i)*time.Second))).ID)
		notes = append(notes, memRemember(t, s, memNSA, newMem("note", "", fmt.Sprintf("shared word note %d", i), memT0.Add(time.Duration(i)*time.Second+time.Millisecond))).ID)
	}
	memRemember(t, s, memNSB, newMem("fact", "", "shared word other namespace", memT0.Add(time.Hour)))
	memRemember(t, s, memNSJoined, newMem("fact", "", "shared word joined namespace", memT0.Add(time.Hour)))
	tests := []struct {
		name string
		q    memory.Query
		want []string
	}{
		{"kind", memory.Query{Kind: "fact"}, []string{facts[4], facts[3], facts[2], facts[1], facts[0]}},
		{"kind and limit", memory.Query{Kind: "note", Limit: 2}, []string{notes[4], notes[3]}},
		{"limit", memory.Query{Limit: 3}, []string{notes[4], facts[4], notes[3]}},
		{"limit 1", memory.Query{Limit: 1}, []string{notes[4]}},
		{"text and kind", memory.Query{Text: "shared", Kind: "note", Limit: 2}, []string{notes[4], notes[3]}},
		{"text and limit", memory.Query{Text: "word", Limit: 1}, []string{notes[4]}},
		{"unknown kind", memory.Query{Kind: "decision"}, nil},
		{"no match", memory.Query{Text: "absent"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memRecall(t, s, memNSA, tt.q); !slices.Equal(memIDs(got), tt.want) {
				t.Errorf("RecallMemories(%+v) = %q, want %q", tt.q, memIDs(got), tt.want)
			}
		})
	}
	if got := memRecall(t, s, memory.Namespace{Tenant: "agents", Agent: "nobody"}, memory.Query{Text: "shared"}); len(got) != 0 {
		t.Errorf("RecallMemories(empty namespace) = %q, want none", memIDs(got))
	}
}

func testRecallNewestFirst(t *testing.T, s memory.Store) {
	// Remembered out of order: the store sorts by CreatedAt.
	want := make([]string, 6)
	for i, minute := range []int{3, 0, 5, 1, 4, 2} {
		r := memRemember(t, s, memNSA, newMem("fact", "", fmt.Sprintf("memory number %d", i), memT0.Add(time.Duration(minute)*time.Minute)))
		want[5-minute] = r.ID
	}
	got := memRecall(t, s, memNSA, memory.Query{})
	if !slices.Equal(memIDs(got), want) {
		t.Errorf("RecallMemories(\"\") = %q, want newest first %q", memIDs(got), want)
	}
	if blank := memRecall(t, s, memNSA, memory.Query{Text: " \t\n"}); !slices.Equal(memIDs(blank), memIDs(got)) {
		t.Errorf("RecallMemories(blank) = %q, want the newest %q", memIDs(blank), memIDs(got))
	}
	for _, q := range []string{"***", "() - \"", "\u0301", "\x00"} {
		if none := memRecall(t, s, memNSA, memory.Query{Text: q}); len(none) != 0 {
			t.Errorf("RecallMemories(%q) = %q, want none (no searchable term)", q, memIDs(none))
		}
	}
}

func testRecallRanking(t *testing.T, s memory.Store) {
	// Filler gives the search terms realistic document frequencies.
	for i := range 12 {
		memRemember(t, s, memNSA, newMem("fact", "", fmt.Sprintf("filler memory %d about nothing in particular", i), memT0))
	}
	both := memRemember(t, s, memNSA, newMem("fact", "", "the deploy runbook lives in the wiki", memT0.Add(time.Minute)))
	one := memRemember(t, s, memNSA, newMem("fact", "", "the deploy happens on friday morning", memT0.Add(2*time.Minute)))
	older := memRemember(t, s, memNSA, newMem("fact", "", "alpha beta gamma", memT0.Add(3*time.Minute)))
	newer := memRemember(t, s, memNSA, newMem("note", "", "alpha beta gamma", memT0.Add(4*time.Minute)))
	tests := []struct {
		q    string
		want []string
	}{
		{"deploy runbook", []string{both.ID, one.ID}},
		{"runbook deploy", []string{both.ID, one.ID}},
		{"beta", []string{newer.ID, older.ID}},
		{"gamma alpha", []string{newer.ID, older.ID}},
	}
	for _, tt := range tests {
		if got := memRecall(t, s, memNSA, memory.Query{Text: tt.q}); !slices.Equal(memIDs(got), tt.want) {
			t.Errorf("RecallMemories(%q) = %q, want %q", tt.q, memIDs(got), tt.want)
		}
	}
}

func testRecallText(t *testing.T, s memory.Store) {
	add := func(text, key string, tags ...string) string {
		m := newMem("fact", key, text, memT0)
		m.Tags = tags
		return memRemember(t, s, memNSA, m).ID
	}
	cafe := add("Meet at the Café on Monday", "")
	han := add("你好世界，这是一个测试", "")
	kana := add("東京のオフィスで金曜日にデプロイする", "")
	hangul := add("세계 최고의 커피를 좋아합니다", "")
	cyr := add("Пользователь предпочитает тёмную тему", "")
	ticket := add("see ticket 1234 for details", "")
	reversed := add("1234 ticket numbers are random", "")
	party := add("ship it 🚀 after the 🎉 party", "")
	keyed := add("the value is 42", "answer-of-life", "Douglas", "Towel🧣")
	tests := []struct {
		name string
		q    string
		want []string
	}{
		{"case folded", "MONDAY", []string{cafe}},
		{"diacritics folded", "cafe", []string{cafe}},
		{"diacritics in the query", "CAFÉ", []string{cafe}},
		{"han phrase", "世界", []string{han}},
		{"han single", "测", []string{han}},
		{"han phrase order matters", "界世", nil},
		{"kana", "デプロイ", []string{kana}},
		{"han in japanese", "金曜日", []string{kana}},
		{"hangul", "커피", []string{hangul}},
		{"cyrillic case", "ТЕМУ", []string{cyr}},
		{"term is a phrase", "ticket-1234", []string{ticket}},
		{"phrase order matters", "1234-ticket", []string{reversed}},
		{"emoji", "🎉", []string{party}},
		{"any term matches", "🚀 monday", []string{cafe, party}},
		{"key", "answer", []string{keyed}},
		{"key phrase", "answer-of-life", []string{keyed}},
		{"tag", "douglas", []string{keyed}},
		{"tag emoji", "🧣", []string{keyed}},
		{"text and key are separate", "42-answer", nil},
		{"word prefix does not match", "tick", nil},
		{"no match", "kubernetes", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memIDs(memRecall(t, s, memNSA, memory.Query{Text: tt.q}))
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("RecallMemories(%q) = %q, want %q", tt.q, got, want)
			}
		})
	}
}

func testRecallSyntaxNotInterpreted(t *testing.T, s memory.Store) {
	secret := memRemember(t, s, memNSA, newMem("fact", "", "the secret plan", memT0)).ID
	textSecret := memRemember(t, s, memNSA, newMem("fact", "", "text secret handshake", memT0.Add(time.Second))).ID
	abc := memRemember(t, s, memNSA, newMem("fact", "", "abcdef ghi", memT0.Add(2*time.Second))).ID
	tests := []struct {
		q    string
		want []string // nil: matches nothing
	}{
		{`text:secret`, []string{textSecret}},     // not a column filter: the phrase "text secret"
		{`-secret`, []string{secret, textSecret}}, // not a negation
		{`!secret`, []string{secret, textSecret}}, // not a negation
		{`plan NOT secret`, []string{secret, textSecret}},
		{`secret AND nothing`, []string{secret, textSecret}},
		{`abc*`, nil},  // not a prefix query
		{`abc:*`, nil}, // not a prefix query
		{`^abcdef`, []string{abc}},
		{`"secret plan"`, []string{secret, textSecret}}, // two terms: "secret and plan"
		{`'plan'`, []string{secret}},
		{`plan:A`, nil},                   // the phrase "plan a", not a weight
		{`secret&plan`, []string{secret}}, // the phrase "secret plan"
		{`secret|plan`, []string{secret}},
		{`secret<->handshake`, []string{textSecret}}, // the phrase "secret handshake"
		{`(plan`, []string{secret}},
		{`NEAR(secret plan, 2)`, []string{secret}}, // terms "near secret", "plan", "2"
		{`{text meta}: plan`, []string{secret, textSecret}},
		{`a OR`, nil},
		{`AND(`, nil},
		{`*`, nil}, {`"`, nil}, {`'`, nil}, {`)`, nil}, {`""""`, nil}, {`\"`, nil}, {`a + b`, nil},
		{"tab\there", nil}, {"\x00", nil}, {"🎉*", nil}, {"世界 AND", nil}, {`'a':1`, nil}, {`\\`, nil},
	}
	for _, tt := range tests {
		got, err := s.RecallMemories(context.Background(), memNSA, memory.Query{Text: tt.q, Limit: 10})
		if err != nil {
			t.Errorf("RecallMemories(%q) = %v, want no error", tt.q, err)
			continue
		}
		g := memIDs(got)
		slices.Sort(g)
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if !slices.Equal(g, want) {
			t.Errorf("RecallMemories(%q) = %q, want %q", tt.q, g, want)
		}
	}
}
