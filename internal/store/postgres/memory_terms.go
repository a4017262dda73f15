package postgres

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/memory/terms"
)

// A memory's tsvector and a recall's tsquery are written in Go, in the
// input syntax of those types (quoted lexemes, positions, operators),
// from terms.Tokens: no text search configuration, parser or dictionary
// of the server takes part, so the lexemes are the same on every server
// and the same as the SQLite store's tokens, and nothing a user types is
// read as tsquery syntax. PostgreSQL bounds what a tsvector holds:
const (
	// maxLexemeBytes is the longest lexeme; longer tokens are cut, at a
	// character boundary, in memories and queries alike.
	maxLexemeBytes = 2047
	// maxPosition is the last position; later tokens all sit there, so a
	// phrase past the 16383rd token of a memory is not found.
	maxPosition = 16383
	// maxPositions is how many positions a lexeme keeps; a phrase at a
	// later occurrence is not found.
	maxPositions = 256
)

// lexeme returns tok cut to maxLexemeBytes at a character boundary.
func lexeme(tok string) string {
	if len(tok) <= maxLexemeBytes {
		return tok
	}
	n := maxLexemeBytes
	for n > 0 && !utf8.RuneStart(tok[n]) {
		n--
	}
	return tok[:n]
}

// writeLexeme writes tok quoted for tsvector and tsquery input: in single
// quotes, with quotes doubled and backslashes escaped. (Tokens hold
// neither; this is defence in depth.)
func writeLexeme(b *strings.Builder, tok string) {
	b.WriteByte('\'')
	for _, r := range tok {
		switch r {
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
}

// memoryTerms returns the tsvector of m in its text form: the tokens of
// m.Text at positions 1, 2, ..., then the tokens of its key and tags
// (one list, as the SQLite store's "meta" column) after a gap of one
// position, so that no phrase spans text and key. Example: text "Hello
// world", key "greeting" is "'hello':1 'world':2 'greeting':4".
func memoryTerms(m memory.Memory) string {
	var (
		order []string
		pos   = make(map[string][]int)
		next  = 1
	)
	add := func(s string) {
		for _, tok := range terms.Tokens(s) {
			tok = lexeme(tok)
			p, seen := pos[tok]
			if !seen {
				order = append(order, tok)
			}
			if len(p) < maxPositions && (len(p) == 0 || p[len(p)-1] < maxPosition) {
				pos[tok] = append(p, min(next, maxPosition))
			}
			next++
		}
	}
	add(m.Text)
	next++
	add(m.Key + " " + strings.Join(m.Tags, " "))
	var b strings.Builder
	for i, tok := range order {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeLexeme(&b, tok)
		for j, p := range pos[tok] {
			if j == 0 {
				b.WriteByte(':')
			} else {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p))
		}
	}
	return b.String()
}

// memoryQuery returns the tsquery, in its text form, that finds the
// memories matching the recall query q (see memory.Query): each term of
// terms.Query(q) is the phrase (<->) of its tokens, and the terms are
// joined with OR (|). Example: "世界 dark" is "('世' <-> '界') | ('dark')".
// It returns "" if q has no term.
func memoryQuery(q string) string {
	var b strings.Builder
	for _, term := range terms.Query(q) {
		toks := terms.Tokens(term)
		if len(toks) == 0 {
			continue // an empty group is a tsquery syntax error
		}
		if b.Len() > 0 {
			b.WriteString(" | ")
		}
		b.WriteByte('(')
		for j, tok := range toks {
			if j > 0 {
				b.WriteString(" <-> ")
			}
			writeLexeme(&b, lexeme(tok))
		}
		b.WriteByte(')')
	}
	return b.String()
}
