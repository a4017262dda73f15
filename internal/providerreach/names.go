package providerreach

import (
	"unicode"
	"unicode/utf8"
)

// normName appends k to dst in lower case without "_" and "-", the long
// s read as "s" (encoding/json, and so a provider written in Go, matches
// names with it and with the Kelvin sign, which unicode.ToLower makes
// "k").
func normName(dst, k []byte) []byte {
	for len(k) > 0 {
		r, n := utf8.DecodeRune(k)
		k = k[n:]
		switch {
		case r == '_' || r == '-':
			continue
		case r == '\u017f':
			r = 's'
		case r < utf8.RuneSelf:
			if r >= 'A' && r <= 'Z' {
				r += 'a' - 'A'
			}
			dst = append(dst, byte(r))
			continue
		}
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst
}
