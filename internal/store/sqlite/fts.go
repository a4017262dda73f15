package sqlite

import (
	"strconv"
	"strings"
	"unicode"
)

// The FTS5 table uses the unicode61 tokenizer (case folded, diacritics
// removed: "café" is indexed as "cafe"), which splits on spaces and
// punctuation. Two kinds of text need help before it sees them:
//
//   - Chinese and Japanese are written without spaces, so ftsText puts
//     every Han, Hiragana, Katakana and Hangul character in its own token;
//     a query term becomes the phrase of those tokens ("世界" is the phrase
//     "世 界", which matches inside "你好世界").
//   - unicode61 drops symbols (category So, which holds emoji), so
//     ftsText spells each one as the token "xu" + its code point in hex
//     ("🎉" is "xu1f389"), making it searchable.
//
// The same transformation is applied to indexed text and to queries.

func isCJK(r rune) bool {
	return r >= 0x1100 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

func isSymbol(r rune) bool {
	return r >= 0x80 && unicode.Is(unicode.So, r)
}

// ftsText returns s as the FTS5 table indexes it.
func ftsText(s string) string {
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

// hasToken reports whether unicode61 finds a token in s: a letter, a
// number or a private-use character.
func hasToken(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r)
	}) >= 0
}

// ftsQuery turns a user's query into an FTS5 MATCH expression: each
// whitespace-separated term becomes a quoted phrase (so nothing the user
// types is FTS5 syntax), and the phrases are joined with OR, leaving the
// ranking to BM25. Terms without a token are dropped; the result is ""
// if none is left.
func ftsQuery(q string) string {
	var b strings.Builder
	for _, term := range strings.Fields(dropControl(q)) {
		t := ftsText(term)
		if !hasToken(t) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(t, `"`, `""`))
		b.WriteByte('"')
	}
	return b.String()
}

// dropControl removes control characters (NUL ends an FTS5 query string
// early, the rest are never searchable).
func dropControl(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
