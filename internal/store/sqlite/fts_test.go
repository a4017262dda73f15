package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/memory/terms"
)

func TestFTSQuery(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"one term", "cafe", `"cafe"`},
		{"terms or", "dark mode", `"dark" OR "mode"`},
		{"quote escaped", `a"b`, `"a""b"`},
		{"lone quote dropped", `"`, ``},
		{"operators quoted", `AND( x`, `"AND(" OR "x"`},
		{"column filter quoted", `text:secret`, `"text:secret"`},
		{"cjk phrase", "世界", `" 世  界 "`},
		{"punctuation only", "*** ()", ``},
		{"empty", "   ", ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ftsQuery(tt.in); got != tt.want {
				t.Errorf("ftsQuery(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzRecallQuery checks that no query text is an FTS5 syntax error.
func FuzzRecallQuery(f *testing.F) {
	for _, s := range []string{
		`"`, `AND(`, `NEAR(a b, 2)`, `a OR`, `*`, `^start`, `-x`, `{text meta}: y`, `text:x`,
		`'`, `)`, `""""`, `a + b`, "tab\there", "世界 AND", "\x00", "🎉*", `\"`,
	} {
		f.Add(s)
	}
	db := openTestDB(f)
	ns := memory.Namespace{Tenant: "t", Agent: "a"}
	if _, err := db.RememberMemory(context.Background(), ns, memory.Memory{
		Kind: "fact", Text: "something to find", Session: "p", CreatedAt: time.Now(),
	}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if _, err := db.RecallMemories(context.Background(), ns, memory.Query{Text: q, Limit: 10}); err != nil {
			t.Errorf("RecallMemories(%q) = %v, want no error", q, err)
		}
	})
}

// ftsBlocks are the Unicode blocks that hold the world's common scripts,
// checked character by character by TestTokensMatchFTS5.
var ftsBlocks = [][2]rune{
	{0x0000, 0x058f},   // Latin, IPA, combining marks, Greek, Cyrillic, Armenian
	{0x0590, 0x06ff},   // Hebrew, Arabic
	{0x0900, 0x0dff},   // Indic scripts
	{0x0e00, 0x0eff},   // Thai, Lao
	{0x10a0, 0x11ff},   // Georgian, Hangul Jamo
	{0x1e00, 0x1fff},   // Latin Extended Additional, Greek Extended
	{0x2000, 0x2bff},   // punctuation, currency, letterlike, numbers, arrows, symbols
	{0x3000, 0x30ff},   // CJK punctuation, Hiragana, Katakana
	{0x3130, 0x318f},   // Hangul compatibility Jamo
	{0x4e00, 0x4fff},   // CJK ideographs (part)
	{0xac00, 0xacff},   // Hangul syllables (part)
	{0xfb00, 0xfb4f},   // ligatures
	{0xff00, 0xffef},   // half- and fullwidth forms
	{0x1f300, 0x1faff}, // emoji
}

// ftsKnownDifferences are the characters of ftsBlocks on which
// terms.Tokens and FTS5 differ: those assigned (or given a case) after
// the Unicode version of SQLite's tables, which SQLite takes for
// unfolded letters, and two archaic letters SQLite does not fold.
var ftsKnownDifferences = [][2]rune{
	{0x01e0, 0x01e1},                   // Ǡ ǡ: SQLite does not fold them to "a"
	{0x037f, 0x037f},                   // Greek capital yot
	{0x0528, 0x052f},                   // Cyrillic Supplement additions
	{0x0605, 0x0605}, {0x061c, 0x061d}, // Arabic format and punctuation
	{0x09fd, 0x09fe}, {0x0a76, 0x0a76}, {0x0afa, 0x0aff}, {0x0b55, 0x0b55}, // Indic additions
	{0x0c00, 0x0c00}, {0x0c04, 0x0c04}, {0x0c3c, 0x0c3c}, {0x0c77, 0x0c77},
	{0x0c81, 0x0c81}, {0x0c84, 0x0c84}, {0x0cf3, 0x0cf3},
	{0x0d00, 0x0d01}, {0x0d3b, 0x0d3c}, {0x0d81, 0x0d81},
	{0x0eba, 0x0eba}, {0x0ece, 0x0ece}, // Lao additions
	{0x2066, 0x2069}, // bidi isolates
	{0x20ba, 0x20c0}, // currency signs from ₺ (2012) on
}

// TestTokensMatchFTS5 checks that the FTS5 table holds, for each memory,
// exactly terms.Tokens of its text and of its key and tags: the tokens
// the PostgreSQL store indexes. It stores a corpus of mixed texts and one
// memory per character of ftsBlocks ("a" + c + "b"), reads what FTS5
// indexed through an fts5vocab table, and compares.
func TestTokensMatchFTS5(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	type doc struct {
		m    memory.Memory
		meta string
	}
	var docs []doc
	add := func(text, key string, tags ...string) {
		meta := strings.Join(append([]string{key}, tags...), " ")
		docs = append(docs, doc{memory.Memory{Kind: "fact", Key: key, Text: text, Tags: tags, Session: "p", CreatedAt: t0}, meta})
	}
	for _, s := range []string{
		"The user prefers dark mode in VS Code, v1.85 (ticket-1234).",
		"Café CAFÉ naïve résumé façade Việt Nam crêperie cafe\u0301",
		"straße İstanbul ılık ΣΟΦΟΣ σοφος ά Ёлка йод Привет мир",
		"用户喜欢深色主题和简洁的界面。你好，世界！", "東京のオフィスで金曜日にデプロイする", "세계 최고의 커피를 좋아합니다",
		"ship it 🚀 after the 🎉 party 👍🏽 ok 👨‍👩‍👧 🇫🇷 ❤️ 1️⃣", "ＡＢＣ１２３ ² ① Ⅷ ﬁne", "हिन्दी में लिखा है", "مرحبا بالعالم שלום עולם",
		"email a.b@example.com https://example.com/x?y=1&z=2 C:\\path\\file.txt",
		"tab\tnew\nline\x00nul", "\xff\xfe invalid", "",
	} {
		add(s, "key-"+s[:min(len(s), 5)], "tag one", "Tag🎉")
	}
	// The characters of ftsBlocks, 64 to a memory: "a" + c + "b", spaced.
	var sweep []string
	for _, b := range ftsBlocks {
		for c := b[0]; c <= b[1]; c++ {
			if (c >= 0xd800 && c <= 0xdfff) || !unicode.IsPrint(c) && !unicode.Is(unicode.Mn, c) && !unicode.Is(unicode.Cf, c) {
				continue // unassigned, surrogates, controls
			}
			known := false
			for _, k := range ftsKnownDifferences {
				known = known || k[0] <= c && c <= k[1]
			}
			if known {
				continue
			}
			if sweep = append(sweep, "a"+string(c)+"b"); len(sweep) == 64 {
				add(strings.Join(sweep, " "), "")
				sweep = sweep[:0]
			}
		}
	}
	add(strings.Join(sweep, " "), "")
	ids := make(map[int64]doc, len(docs))
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for _, d := range docs {
			id, err := memory.NewID(t0.Add(time.Duration(len(ids)) * time.Millisecond))
			if err != nil {
				return err
			}
			ids[id] = d
			if err := db.insertMemory(ctx, tx, nsA, d.m, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, memories_fts, instance)`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, `SELECT doc, col, term FROM temp.vocab ORDER BY doc, col, offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	indexed := make(map[int64]map[string][]string)
	for rows.Next() {
		var (
			id        int64
			col, term string
		)
		if err := rows.Scan(&id, &col, &term); err != nil {
			t.Fatal(err)
		}
		if indexed[id] == nil {
			indexed[id] = make(map[string][]string)
		}
		indexed[id][col] = append(indexed[id][col], term)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, d := range ids {
		for col, s := range map[string]string{"text": d.m.Text, "meta": d.meta} {
			if got, want := indexed[id][col], terms.Tokens(s); !slices.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Errorf("FTS5 indexed %s %q as %q, terms.Tokens = %q; they differ from token %d: %q, want %q",
					col, s, got, want, i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
			}
		}
	}
	t.Logf("compared the tokens of %d memories", len(docs))
}
