package mcpproxy

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
)

// secretForms are the byte strings whose presence in an upstream answer
// means it carries the credential: the credential itself, JSON-escaped,
// in hex (either case), and in standard and URL-safe base64 at each of
// the three alignments it can have inside a larger blob (an image or
// resource whose bytes echo the request's headers), and percent-encoded
// as in a URL's query or path (either case of hex digits). For base64 only the
// characters the credential alone decides are kept, so the form matches
// whatever surrounds it. Nil for an empty credential.
func secretForms(secret string) [][]byte {
	if secret == "" {
		return nil
	}
	forms := [][]byte{[]byte(secret), []byte(strings.ToUpper(hex.EncodeToString([]byte(secret)))), []byte(hex.EncodeToString([]byte(secret)))}
	if q, err := json.Marshal(secret); err == nil && len(q) > 2 {
		forms = append(forms, q[1:len(q)-1])
	}
	for _, esc := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		if esc != secret {
			forms = append(forms, []byte(esc), lowerEscapes(esc))
		}
	}
	for k := 0; k < 3; k++ {
		buf := append(make([]byte, k), secret...)
		from, to := (4*k+2)/3, (len(buf)*4)/3 // chars decided by the credential's bytes alone
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			s := enc.EncodeToString(buf)
			if to-from >= 8 && to <= len(s) {
				forms = append(forms, []byte(s[from:to]))
			}
		}
	}
	return forms
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

// containsAny reports whether raw contains one of forms.
func containsAny(raw []byte, forms [][]byte) bool {
	for _, f := range forms {
		if bytes.Contains(raw, f) {
			return true
		}
	}
	return false
}
