// Package terms turns a memory's text into the tokens that keyword recall
// indexes, and a recall query into the terms it looks for. Both stores
// index the same tokens, so a query finds the same memories in SQLite and
// in PostgreSQL.
//
// # Tokens
//
// A token is a run of letters (Unicode categories L*), numbers (N*) and
// private-use characters (Co), case folded ("Straße" is "straße", "ΣΟΦΟΣ"
// is "σοφοσ"), with the diacritics of Latin letters removed ("Café" is
// "cafe", "Việt" is "viet"). Any other character ends a token, except
// that
//
//   - every Han, Hiragana, Katakana and Hangul letter or number is a
//     token of its own: Chinese and Japanese are written without spaces,
//     so "你好世界" is the four tokens 你 好 世 界;
//   - every symbol of category So (which holds emoji) is a token of its
//     own, spelled "xu" and its code point in lowercase hex: "🎉" is
//     "xu1f389";
//   - the combining marks in [dropped] (acute, grave, diaeresis,
//     cedilla...) are part of a token but add nothing to it, so
//     "cafe\u0301" is "cafe" like "café";
//   - the emoji skin-tone modifiers U+1F3FB..U+1F3FF are letters.
//
// These are the tokens that SQLite's FTS5 unicode61 tokenizer with
// remove_diacritics 2 finds in [Spaced](s), which is how the embedded
// store indexes s; the PostgreSQL store indexes [Tokens](s) itself. The
// two differ only on characters that SQLite's Unicode tables, older than
// Go's, do not know (SQLite takes them for letters: "₽" and "₿" join the
// word beside them) and on a few archaic Latin letters such as "ǡ" that
// SQLite does not fold.
// TestTokensMatchFTS5 in internal/store/sqlite checks this on the blocks
// that hold the world's common scripts.
//
// # Queries
//
// A query is a list of terms separated by white space (control characters
// count as white space). A term matches a memory whose text, key or tags
// hold the term's tokens as a phrase, consecutive and in order: "世界"
// matches "你好世界" and "ticket-1234" matches "see ticket 1234". A term
// without a token ("***") is dropped. Nothing in a query is search syntax
// of either store.
package terms

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// isCJK reports whether r is a Han, Hiragana, Katakana or Hangul
// character: a token of its own if it is a letter or a number.
func isCJK(r rune) bool {
	return r >= 0x1100 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// isSymbol reports whether r is a non-ASCII symbol of category So: a
// token of its own, spelled "xu" + hex.
func isSymbol(r rune) bool {
	return r >= 0x80 && unicode.Is(unicode.So, r)
}

// dropped are the combining marks that unicode61 with remove_diacritics 2
// keeps inside a token and then removes.
var dropped = [...]rune{
	0x300, 0x301, 0x302, 0x303, 0x304, 0x306, 0x307, 0x308, 0x309, 0x30a, 0x30b, 0x30c, 0x30f,
	0x311, 0x31b, 0x323, 0x324, 0x325, 0x326, 0x327, 0x328, 0x32d, 0x32e, 0x330, 0x331,
}

func isDropped(r rune) bool {
	if r < 0x300 || r > 0x331 {
		return false
	}
	for _, d := range dropped {
		if d == r {
			return true
		}
	}
	return false
}

// isWordRune reports whether the non-ASCII r belongs in a token: a
// letter, a number, a private-use character or a skin-tone modifier.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r) || isSkinTone(r)
}

// isSkinTone reports whether r is an emoji skin-tone modifier (category
// Sk), which SQLite's tables predate and take for a letter.
func isSkinTone(r rune) bool { return r >= 0x1f3fb && r <= 0x1f3ff }

// Spaced returns s with a space on each side of every CJK character and
// every symbol spelled as "xu" + its code point in hex ("go语言🎉" is
// "go 语  言  xu1f389 "). The embedded store indexes Spaced(s) with FTS5's
// unicode61 tokenizer, which then finds [Tokens](s). Text without such
// characters is returned unchanged.
func Spaced(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return isCJK(r) || isSymbol(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) * 2)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		switch {
		case isCJK(r):
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
		case isSymbol(r):
			b.WriteString(" xu")
			b.WriteString(strconv.FormatInt(int64(r), 16))
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Tokens returns the tokens of s in order, repeats included (see the
// package doc). Invalid UTF-8 counts as U+FFFD, a symbol. The result is
// nil if s has no token.
func Tokens(s string) []string {
	var (
		toks []string
		cur  strings.Builder
	)
	end := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			switch {
			case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
				cur.WriteByte(byte(r))
			case 'A' <= r && r <= 'Z':
				cur.WriteByte(byte(r) + 'a' - 'A')
			default:
				end()
			}
		case isCJK(r):
			end()
			if isWordRune(r) {
				toks = append(toks, string(r))
			}
		case isSymbol(r):
			end()
			toks = append(toks, "xu"+strconv.FormatInt(int64(r), 16))
		case isDropped(r):
		case isWordRune(r):
			cur.WriteString(fold(r))
		default:
			end()
		}
	}
	end()
	return toks
}

// fold returns r case folded and, if it is a Latin letter that
// decomposes into an ASCII letter and combining marks, that ASCII letter.
func fold(r rune) string {
	if r != 'ı' { // dotless i folds to itself, not to "i"
		// Through upper case, so that variants fold together as Unicode
		// case folding does: "ς" and "Σ" become "σ", "ſ" becomes "s".
		r = unicode.ToLower(unicode.ToUpper(r))
	}
	if r < utf8.RuneSelf || !unicode.Is(unicode.Latin, r) {
		return string(r)
	}
	var buf [utf8.UTFMax]byte
	d := norm.NFD.Append(nil, buf[:utf8.EncodeRune(buf[:], r)]...)
	if len(d) < 2 || d[0] >= utf8.RuneSelf || !unicode.IsLetter(rune(d[0])) {
		return string(r)
	}
	for _, m := range string(d[1:]) {
		if !unicode.Is(unicode.Mn, m) {
			return string(r)
		}
	}
	return string(d[:1])
}

// Query returns the terms of the query q, in order: its fields separated
// by white space or control characters, without those that hold no
// token and without a repeat of an earlier term's tokens ("a A a." is
// one term: it matches the same memories, and a search's cost grows
// with its terms, 32 times "a" taking seconds over long memories). The
// result is nil if no term is left; such a query matches nothing.
func Query(q string) []string {
	fields := strings.FieldsFunc(q, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	out := fields[:0]
	seen := map[string]bool{}
	for _, f := range fields {
		toks := Tokens(f)
		key := strings.Join(toks, " ")
		if len(toks) > 0 && !seen[key] {
			seen[key] = true
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
