// Package secretform lists the forms in which a secret (a provider key,
// an upstream credential) can come back in an answer that echoes a
// request: a debug endpoint or error page quoting a header, a URL or a
// whole request, in whatever encoding the upstream's framework used.
// custody scrubs or refuses an answer that holds any of them. Not listed,
// and so not caught: any other transform, line-wrapped base64 among them
// (README, Known limitations).
//
// Forms(secret) is, for a non-empty secret:
//   - the secret itself;
//   - JSON-escaped, as encoding/json writes it and with '/' escaped as
//     "\/" (PHP's json_encode);
//   - in hex, either case;
//   - in UTF-16, little- and big-endian (a .NET string's bytes);
//   - percent-encoded as in a URL's query and path, the escapes' hex
//     digits in either case;
//   - in standard and URL-safe base64 at each of the three alignments it
//     can have inside a larger blob ("Bearer <key>" encoded whole, an
//     image echoing the request): only the characters the secret's bytes
//     alone decide, at least 8 of them, so the form matches whatever
//     surrounds it.
package secretform

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"unicode/utf16"
)

// Forms returns the byte strings of secret's forms (see the package
// doc), without duplicates; nil for an empty secret.
func Forms(secret string) [][]byte {
	if secret == "" {
		return nil
	}
	var forms [][]byte
	add := func(f []byte) {
		for _, g := range forms {
			if bytes.Equal(f, g) {
				return
			}
		}
		forms = append(forms, f)
	}
	add([]byte(secret))
	add([]byte(strings.ToUpper(hex.EncodeToString([]byte(secret)))))
	add([]byte(hex.EncodeToString([]byte(secret))))
	if q, err := json.Marshal(secret); err == nil && len(q) > 2 {
		add(q[1 : len(q)-1])
		add(bytes.ReplaceAll(q[1:len(q)-1], []byte("/"), []byte(`\/`)))
	}
	var le, be []byte
	for _, c := range utf16.Encode([]rune(secret)) {
		le = append(le, byte(c), byte(c>>8))
		be = append(be, byte(c>>8), byte(c))
	}
	add(le)
	add(be)
	for _, esc := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		add([]byte(esc))
		add(lowerEscapes(esc))
	}
	for k := 0; k < 3; k++ {
		buf := append(make([]byte, k), secret...)
		from, to := (4*k+2)/3, (len(buf)*4)/3 // chars decided by the secret's bytes alone
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			s := enc.EncodeToString(buf)
			if to-from >= 8 && to <= len(s) {
				add([]byte(s[from:to]))
			}
		}
	}
	return forms
}

// ContainsAny reports whether raw contains one of forms.
func ContainsAny(raw []byte, forms [][]byte) bool {
	for _, f := range forms {
		if bytes.Contains(raw, f) {
			return true
		}
	}
	return false
}

// lowerEscapes is esc with the hex digits of its %XX escapes in lower
// case.
func lowerEscapes(esc string) []byte {
	b := []byte(esc)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
			i += 2
		}
	}
	return b
}

func lowerHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}
