package terms

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSpaced(t *testing.T) {
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
			if got := Spaced(tt.in); got != tt.want {
				t.Errorf("Spaced(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"ascii", "Hello, World! x_y", []string{"hello", "world", "x", "y"}},
		{"digits and punctuation", "ticket-1234 v1.5 a'b", []string{"ticket", "1234", "v1", "5", "a", "b"}},
		{"latin diacritics", "Café NAÏVE Việt façade", []string{"cafe", "naive", "viet", "facade"}},
		{"combining acute", "cafe\u0301", []string{"cafe"}},
		{"letters that do not decompose", "straße ø æ ł", []string{"straße", "ø", "æ", "ł"}},
		{"turkish", "İstanbul ılık", []string{"istanbul", "ılık"}},
		{"cyrillic keeps its marks", "Ёлка йод", []string{"ёлка", "йод"}},
		{"greek folds sigma", "ΣΟΦΟΣ σοφος ά", []string{"σοφοσ", "σοφοσ", "ά"}},
		{"han", "你好，世界", []string{"你", "好", "世", "界"}},
		{"mixed", "go语言x", []string{"go", "语", "言", "x"}},
		{"kana and hangul", "カタカナ 세계", []string{"カ", "タ", "カ", "ナ", "세", "계"}},
		{"emoji", "ship it🚀now", []string{"ship", "it", "xu1f680", "now"}},
		{"skin tone", "👍🏽ok", []string{"xu1f44d", "🏽ok"}},
		{"fullwidth", "ＡＢＣ１", []string{"ａｂｃ１"}},
		{"numbers", "² ① Ⅷ", []string{"²", "①", "ⅷ"}},
		{"devanagari marks separate", "हिन्दी", []string{"ह", "न", "द"}},
		{"nothing", " ,.;-*() ", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tokens(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestQuery(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"one term", "cafe", []string{"cafe"}},
		{"terms", "dark  mode\tnow", []string{"dark", "mode", "now"}},
		{"syntax is kept as text", `AND( "x" text:y`, []string{"AND(", `"x"`, "text:y"}},
		{"control characters separate", "a\x00b\x1fc", []string{"a", "b", "c"}},
		{"cjk", "世界", []string{"世界"}},
		{"emoji", "🎉", []string{"🎉"}},
		{"punctuation only dropped", `*** () " -`, nil},
		{"combining mark only dropped", "\u0301", nil},
		{"empty", "   ", nil},
		{"a repeat is one term", "a A a. b a-b A-B a", []string{"a", "b", "a-b"}},
		{"the same tokens repeat", "café CAFE cafe", []string{"café"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Query(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Query(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzTokens checks the invariants both stores rely on: tokens are
// non-empty valid UTF-8 without separators; Spaced does not change the
// tokens; a query term has tokens and a term's tokens are found in a
// text that holds the term.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{
		"hello world", "Café", "你好世界", "go语言🎉", "👍🏽", "cafe\u0301", "\xff\xfe", "a\x00b",
		"ΣΟΦΟΣ", "İı", "हिन्दी", "ǅ", "x‍y", "1.5e10", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokens(s)
		for _, tok := range toks {
			if tok == "" || !utf8.ValidString(tok) || strings.ContainsAny(tok, " \t\n") {
				t.Fatalf("Tokens(%q) has token %q", s, tok)
			}
		}
		if got := Tokens(Spaced(s)); !slices.Equal(got, toks) {
			t.Fatalf("Tokens(Spaced(%q)) = %q, want %q", s, got, toks)
		}
		for _, term := range Query(s) {
			tt := Tokens(term)
			if len(tt) == 0 {
				t.Fatalf("Query(%q) has term %q without a token", s, term)
			}
			if !containsRun(toks, tt) {
				t.Fatalf("tokens %q of %q do not hold its term %q (%q)", toks, s, term, tt)
			}
		}
	})
}

// containsRun reports whether sub occurs in s as consecutive elements.
func containsRun(s, sub []string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if slices.Equal(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
