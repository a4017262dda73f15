package policy

import "strings"

// Free text (a shell command, a script, a prompt) is searched for cloud
// metadata endpoints only: an internal or ambiguous address in prose is
// too common to deny (a dev server on localhost, an example IP), while a
// metadata address in a command is almost never anything but an attempt
// to read the node's credentials.
const (
	// maxTextDests bounds the destinations taken from one call's text.
	maxTextDests = 64
	// maxTextToken bounds the length of a token that is classified.
	maxTextToken = 2048
)

// textDelims separate tokens of free text: whitespace, quotes and shell
// punctuation. Brackets stay inside tokens ("[fd00:ec2::254]").
const textDelims = " \t\r\n\v\f\"'`<>|;&(){}=,"

// text adds, marked InText, the metadata endpoints named in free text s:
// every URL with a scheme in it, and every bare token whose host looks
// like an IP address in any notation (169.254.169.254, 0xA9FEA9FE,
// 2852039166, [fd00:ec2::254]) or like a metadata name
// (metadata.google.internal). Tokens that are not metadata endpoints are
// not recorded.
func (f *finder) text(s string) {
	for len(s) > 0 && f.textDests < maxTextDests {
		i := strings.IndexAny(s, textDelims)
		tok := s
		if i >= 0 {
			tok, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if tok == "" || len(tok) > maxTextToken {
			continue
		}
		var cand string
		if j := strings.Index(tok, "://"); j > 0 {
			k := j
			for k > 0 && schemeChar(tok[k-1]) {
				k--
			}
			if k == j {
				continue
			}
			cand = tok[k:]
		} else if addressLike(tok) {
			cand = tok
		} else {
			continue
		}
		d := ClassifyURL(cand)
		if d.Kind != KindMetadata {
			// A URL that is not a metadata endpoint as a whole may hide one
			// behind userinfo or backslash tricks
			// (http://u@169.254.169.254@evil.example/): look at its parts.
			if strings.ContainsAny(cand, "@\\") {
				f.parts(cand)
			}
			continue
		}
		f.add(d, cand)
	}
}

// parts adds the metadata endpoints among the "@", "\\" and "/"
// separated parts of a URL.
func (f *finder) parts(u string) {
	for _, p := range strings.FieldsFunc(u, func(r rune) bool { return r == '@' || r == '\\' || r == '/' }) {
		if f.textDests >= maxTextDests {
			return
		}
		if !addressLike(p) {
			continue
		}
		if d := ClassifyURL(p); d.Kind == KindMetadata {
			f.add(d, u)
		}
	}
}

func (f *finder) add(d Destination, input string) {
	d.Input, d.InText = input, true
	f.out = append(f.out, d)
	f.textDests++
}

func schemeChar(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// addressLike reports whether a bare token's host (before any path,
// query or fragment, after any userinfo, without a port) is bracketed,
// is made of the characters of a numeric IPv4 address in any base and
// holds a digit, or names something "metadata"/"instance-data" with a
// dot. A lone word such as "metadata" is prose, not an address.
func addressLike(tok string) bool {
	h := tok
	if i := strings.IndexAny(h, "/?#\\"); i >= 0 {
		h = h[:i]
	}
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		h = h[i+1:]
	}
	if strings.HasPrefix(h, "[") {
		return true
	}
	if i := strings.IndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	if h == "" {
		return false
	}
	digit := false
	numeric := true
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c == '.' || c == 'x' || c == 'X' || isHex(c):
		default:
			numeric = false
		}
	}
	if numeric && digit {
		return true
	}
	l := strings.ToLower(h)
	return strings.Contains(l, ".") && (strings.Contains(l, "metadata") || strings.Contains(l, "instance-data"))
}
