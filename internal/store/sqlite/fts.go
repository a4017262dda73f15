package sqlite

import (
	"strings"

	"github.com/agentcustody/custody/internal/memory/terms"
)

// The FTS5 table uses the unicode61 tokenizer (case folded, diacritics
// removed: "café" is indexed as "cafe"), which splits on spaces and
// punctuation. It indexes terms.Spaced of the text, in which every CJK
// character is its own word and every symbol (emoji) is spelled as a
// word, so that it finds the tokens of terms.Tokens: the same tokens the
// PostgreSQL store indexes.

// ftsText returns s as the FTS5 table indexes it.
func ftsText(s string) string { return terms.Spaced(s) }

// ftsQuery turns a user's query into an FTS5 MATCH expression: each term
// (terms.Query) becomes a quoted phrase of its spaced form (so nothing
// the user types is FTS5 syntax: a term of several tokens, such as
// "世界" or "ticket-1234", is the phrase of its tokens), and the phrases
// are joined with OR, leaving the ranking to BM25. The result is "" if
// the query has no term.
func ftsQuery(q string) string {
	var b strings.Builder
	for _, term := range terms.Query(q) {
		if b.Len() > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(terms.Spaced(term), `"`, `""`))
		b.WriteByte('"')
	}
	return b.String()
}
