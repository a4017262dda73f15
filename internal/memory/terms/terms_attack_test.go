package terms

import (
	"testing"
	"unicode/utf8"
)

// TestAttackQueryTermsAllHaveTokens: Query promises to drop "a term
// without a token", and the PostgreSQL store builds each kept term's
// tsquery phrase from Tokens(term): a kept term with no token becomes
// "()", a tsquery syntax error (500 on recall). Query and Tokens must
// agree on every rune (they once did not for Han-script symbols, CJK
// and Kangxi radicals, category So, which Tokens drops as CJK non-words
// and Query's own test counted as symbols).
func TestAttackQueryTermsAllHaveTokens(t *testing.T) {
	var bad []rune
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := string(r)
		if (len(Query(s)) > 0) != (len(Tokens(s)) > 0) {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d runes where Query and Tokens disagree, e.g. %U %q (first) and %U %q (last)",
			len(bad), bad[0], string(bad[0]), bad[len(bad)-1], string(bad[len(bad)-1]))
	}
}
