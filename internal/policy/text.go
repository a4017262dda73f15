package policy

import (
	"net/netip"
	"strings"
	"unicode/utf8"
)

// Free text (a shell command, a script, a prompt) is searched for cloud
// metadata endpoints only: an internal or ambiguous address in prose is
// too common to deny (a dev server on localhost, an example IP), while a
// metadata address in a command is almost never anything but an attempt
// to read the node's credentials.

// maxTextDests bounds the destinations taken from one call's text.
const maxTextDests = 64

// textDelims separate tokens of free text: whitespace, quotes and shell
// punctuation. Brackets stay inside tokens ("[fd00:ec2::254]").
const textDelims = " \t\r\n\v\f\"'`<>|;&(){}=,"

// text adds, marked InText, the metadata endpoints named in free text s,
// read as it is and once more with shell quoting and parameter
// expansions removed ("169.254.169.25\"4\"", "169.254${x}.169.254").
// Every token is tried as a URL with a scheme (from the scheme on), as an
// IP address in any notation (bare IPv6 too), as host[:port][/path], and
// by each of its parts between "/", ":", "@", "\" (bash's
// /dev/tcp/HOST/PORT, socat's TCP:HOST:PORT, curl's --resolve
// NAME:PORT:ADDR, http:/HOST, userinfo tricks). Tokens that are not
// metadata endpoints are not recorded.
func (f *finder) text(s string) {
	f.scan(s)
	if d := unquote(s); d != s {
		f.scan(d)
	}
}

// isTextDelim[c] reports whether byte c is in textDelims.
var isTextDelim = func() (t [256]bool) {
	for i := 0; i < len(textDelims); i++ {
		t[textDelims[i]] = true
	}
	return t
}()

func (f *finder) scan(s string) {
	start := 0
	for i := 0; i <= len(s) && f.textDests < maxTextDests; i++ {
		if i < len(s) && !isTextDelim[s[i]] {
			continue
		}
		if i > start {
			f.token(s[start:i])
		}
		start = i + 1
	}
}

// token adds the first metadata endpoint found in tok, if any.
func (f *finder) token(tok string) {
	if j := strings.Index(tok, "://"); j > 0 {
		k := j
		for k > 0 && schemeChar(tok[k-1]) {
			k--
		}
		if k < j && schemeHostMayBeMetadata(tok[j+3:]) && f.addMetadata(ClassifyURL(tok[k:]), tok[k:]) {
			return
		}
	}
	// Bare IPv6 (ClassifyURL calls an unbracketed one ambiguous).
	if strings.IndexByte(tok, ':') < 0 {
		// not IPv6: nothing to parse
	} else if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(tok, "["), "]")); err == nil {
		if f.addMetadata(ClassifyHost(a.String()), tok) {
			return
		}
	}
	if addressLike(tok) && f.addMetadata(ClassifyURL(tok), tok) {
		return
	}
	for _, p := range strings.FieldsFunc(tok, func(r rune) bool { return r == '/' || r == ':' || r == '@' || r == '\\' }) {
		if addressLike(p) && f.addMetadata(ClassifyURL(p), tok) {
			return
		}
	}
}

// addMetadata records d, found in input, if it is a metadata endpoint.
func (f *finder) addMetadata(d Destination, input string) bool {
	if d.Kind != KindMetadata {
		return false
	}
	d.Input, d.InText = input, true
	f.out = append(f.out, d)
	f.textDests++
	return true
}

// unquote removes what a shell removes or expands before a command sees
// its words: quotes and backslashes, and parameter expansions ($x, ${x},
// ${IFS} as a space), which are read as empty.
func unquote(s string) string {
	if !strings.ContainsAny(s, `"'\$`) {
		return s
	}
	var b strings.Builder
	noBrace := false // no '}' from here to the end: no later "${" is closed either
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '\\':
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			end := -1
			if !noBrace {
				end = strings.IndexByte(s[i:], '}')
			}
			if end < 0 {
				noBrace = true // searched to the end once: linear, however many "${"
				b.WriteByte(c)
				continue
			}
			if s[i+2:i+end] == "IFS" {
				b.WriteByte(' ')
			}
			i += end
		case c == '$' && i+1 < len(s) && (isLetter(s[i+1]) || s[i+1] == '_'):
			j := i + 1
			for j < len(s) && (isLetter(s[j]) || s[j] == '_' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if s[i+1:j] == "IFS" {
				b.WriteByte(' ')
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func schemeChar(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// addressLike reports whether a bare token's host (before any path,
// query or fragment, after any userinfo, without a port) may name an
// address: it is bracketed, or holds a digit and a dot or is all digits
// (an IPv4 address in any base, a wildcard-DNS name such as
// 169.254.169.254.nip.io), or names something "metadata" or
// "instance-data" with a dot. A lone word such as "metadata" is prose.
func addressLike(tok string) bool {
	h := tok
	for i := 0; i < len(h); i++ {
		if c := h[i]; c == '/' || c == '?' || c == '#' || c == '\\' {
			h = h[:i]
			break
		}
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
	digit, dot, numeric := false, false, true
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c == '.':
			dot = true
		case c == 'x' || c == 'X' || isHex(c):
		default:
			numeric = false
		}
	}
	if digit && (dot || numeric) {
		return true
	}
	l := strings.ToLower(h)
	return dot && (strings.Contains(l, "metadata") || strings.Contains(l, "instance-data"))
}

// schemeHostMayBeMetadata is a cheap test of the authority after "://"
// that lets text scanning skip the full classification of plainly
// public URLs (https://example.com/...): it is false only for an ASCII
// host of letters, digits, dots, dashes and a port that has no digit in
// its name part (so no address in any notation, no wildcard-DNS name)
// and names no metadata service.
func schemeHostMayBeMetadata(rest string) bool {
	h := rest
	if i := strings.IndexAny(h, "/?#"); i >= 0 {
		h = h[:i]
	}
	if h == "" {
		return true
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c >= utf8.RuneSelf || c == '@' || c == '\\' || c == '%' || c == '[' {
			return true
		}
	}
	if addressLike(h) {
		return true
	}
	if i := strings.IndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	l := strings.TrimSuffix(strings.ToLower(h), ".")
	return metadataNames[l] || strings.Contains(l, "metadata") || strings.Contains(l, "instance-data")
}
