package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

func TestFTSText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"ascii unchanged", "hello world", "hello world"},
		{"accents unchanged", "café", "café"},
		{"cyrillic unchanged", "Привет мир", "Привет мир"},
		{"han split", "你好世界", " 你  好  世  界 "},
		{"mixed", "go语言", "go 语  言 "},
		{"kana", "カタカナ", " カ  タ  カ  ナ "},
		{"hangul", "세계", " 세  계 "},
		{"emoji", "party🎉", "party xu1f389 "},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ftsText(tt.in); got != tt.want {
				t.Errorf("ftsText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

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
