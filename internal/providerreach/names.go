package providerreach

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// normName appends k to dst in lower case without "_" and "-", the long
// s read as "s" (encoding/json, and so a provider written in Go, matches
// names with it and with the Kelvin sign, which unicode.ToLower makes
// "k"), and cut at a NUL (a parser that keeps names as C strings reads
// "tools\u0000x" as "tools").
func normName(dst, k []byte) []byte {
	if i := bytes.IndexByte(k, 0); i >= 0 {
		k = k[:i]
	}
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
