// Package jcs implements a strict JSON parser and the RFC 8785 JSON
// Canonicalization Scheme (JCS).
//
// Numbers are IEEE-754 doubles written as ECMAScript's
// Number.prototype.toString writes them (RFC 8785 section 3.2.2.3): the
// shortest digits that round-trip, plain decimal for magnitudes in
// [1e-6, 1e21), exponent form ("1e+21", "1e-7") otherwise, and 0 for -0.
// Parsing refuses a number whose canonical form would denote another value
// (one needing more precision or range than a double, such as
// 9007199254740993, 1e400 or 1e-400), so that two inputs with different
// numbers never share a canonical form, refuses a number beyond
// ±[MaxSafeInteger] that it or its canonical form writes as an integer the
// double is not exactly (1152921504606847000, the canonical form of 2^60,
// or 100000000000000000000000, which becomes 1e+23), so that parsers
// keeping integers exact and parsers of doubles read the same value, and
// refuses a written minus zero (RFC 8785 erratum 7920). Strict parsing
// also rejects duplicate object member names, invalid UTF-8, escaped or raw
// lone surrogates, anything after the top-level value and nesting deeper
// than [MaxDepth] (NaN and Infinity cannot be written in JSON). [Append]
// refuses what Parse would refuse (those doubles, invalid UTF-8, deeper
// nesting), so that everything it writes parses.
//
// Parsed values are nil, bool, string, int64 (integers within
// ±[MaxSafeInteger]), float64 (every other number), []any and map[string]any.
package jcs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth is the deepest nesting of arrays and objects Parse accepts.
const MaxDepth = 64

// MaxSafeInteger is the largest absolute integer value accepted (2^53-1).
const MaxSafeInteger = 1<<53 - 1

// Sentinel errors. Every parse error wraps ErrSyntax or one of the more
// specific sentinels, which themselves do not wrap ErrSyntax.
var (
	ErrSyntax       = errors.New("invalid JSON")
	ErrDuplicateKey = errors.New("duplicate object member name")
	ErrNumber       = errors.New("number not exactly representable as an IEEE-754 double")
	ErrSurrogate    = errors.New("lone surrogate in string")
	ErrUTF8         = errors.New("invalid UTF-8")
	ErrDepth        = errors.New("nesting too deep")
	ErrUnsupported  = errors.New("value not representable in canonical JSON")
)

// An Error is a parse failure at a byte offset.
type Error struct {
	Offset int   // byte offset into the input where the problem was found
	Err    error // one of the sentinels above
	Detail string
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("json at offset %d: %v: %s", e.Offset, e.Err, e.Detail)
	}
	return fmt.Sprintf("json at offset %d: %v", e.Offset, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

type parser struct {
	b       []byte
	i       int
	canon   bool // reject anything not in canonical form
	discard bool // validate only: build no maps or slices, strings may alias b
}

// ValidateCanonicalPrefix checks, exactly as ParseCanonical would when the
// value sits at nesting depth, that b starts with one canonical JSON value,
// and returns its length. It builds no values. Error offsets are relative
// to b.
func ValidateCanonicalPrefix(b []byte, depth int) (int, error) {
	p := &parser{b: b, canon: true, discard: true}
	if _, err := p.value(depth); err != nil {
		return 0, err
	}
	return p.i, nil
}

// ParseCanonicalPrefix is ValidateCanonicalPrefix returning the value.
func ParseCanonicalPrefix(b []byte, depth int) (any, int, error) {
	p := &parser{b: b, canon: true}
	v, err := p.value(depth)
	if err != nil {
		return nil, 0, err
	}
	return v, p.i, nil
}

// ErrNotCanonical is returned by ParseCanonical for valid JSON that is not
// in RFC 8785 canonical form.
var ErrNotCanonical = errors.New("not in RFC 8785 canonical form")

// ParseCanonical is Parse for input that must already be canonical: it
// additionally rejects whitespace, members out of UTF-16 order and
// non-canonical string escapes (ErrNotCanonical), so that
// Append(ParseCanonical(b)) == b, without re-encoding.
func ParseCanonical(b []byte) (any, error) {
	p := &parser{b: b, canon: true}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.i != len(b) {
		return nil, p.err(ErrSyntax, "trailing data")
	}
	return v, nil
}

// Parse strictly parses one JSON value occupying all of b (surrounding
// whitespace allowed).
func Parse(b []byte) (any, error) {
	p := &parser{b: b}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(b) {
		return nil, p.err(ErrSyntax, "trailing data")
	}
	return v, nil
}

func (p *parser) err(s error, detail string) error {
	if p.canon && s == ErrSyntax && p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			return &Error{Offset: p.i, Err: ErrNotCanonical, Detail: "whitespace"}
		}
	}
	return &Error{Offset: p.i, Err: s, Detail: detail}
}

func (p *parser) ws() {
	if p.canon {
		return // whitespace then fails as a syntax error where it appears
	}
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.err(ErrSyntax, "unexpected end of input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth >= MaxDepth {
			return nil, p.err(ErrDepth, "")
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= MaxDepth {
			return nil, p.err(ErrDepth, "")
		}
		return p.array(depth + 1)
	case c == '"':
		// In discard mode strings and numbers are not boxed, which would
		// allocate.
		s, err := p.string()
		if err != nil || p.discard {
			return nil, err
		}
		return s, nil
	case c == '-' || c >= '0' && c <= '9':
		i, f, isFloat, err := p.number()
		if err != nil || p.discard {
			return nil, err
		}
		if isFloat {
			return f, nil
		}
		return i, nil
	case c == 't':
		return true, p.lit("true")
	case c == 'f':
		return false, p.lit("false")
	case c == 'n':
		return nil, p.lit("null")
	default:
		return nil, p.err(ErrSyntax, fmt.Sprintf("unexpected byte %q", c))
	}
}

func (p *parser) lit(s string) error {
	if !bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		return p.err(ErrSyntax, "invalid literal")
	}
	p.i += len(s)
	return nil
}

func (p *parser) object(depth int) (any, error) {
	p.i++ // {
	var m map[string]any
	if !p.discard {
		m = make(map[string]any)
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, nil
	}
	last, first := "", true
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.err(ErrSyntax, "expected member name")
		}
		at := p.i
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		if p.canon {
			// Strictly increasing names cannot repeat.
			if c := CompareUTF16(last, k); !first && c >= 0 {
				if c == 0 {
					return nil, &Error{Offset: at, Err: ErrDuplicateKey, Detail: strconv.Quote(k)}
				}
				return nil, &Error{Offset: at, Err: ErrNotCanonical, Detail: "members out of order"}
			}
			last, first = k, false
		} else if _, dup := m[k]; dup && !p.discard {
			return nil, &Error{Offset: at, Err: ErrDuplicateKey, Detail: strconv.Quote(k)}
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.err(ErrSyntax, "expected ':'")
		}
		p.i++
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		if !p.discard {
			m[k] = v
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.err(ErrSyntax, "unterminated object")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, nil
		default:
			return nil, p.err(ErrSyntax, "expected ',' or '}'")
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	p.i++ // [
	var a []any
	if !p.discard {
		a = []any{}
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		if p.discard {
			return nil, nil
		}
		return a, nil
	}
	for {
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		if !p.discard {
			a = append(a, v)
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.err(ErrSyntax, "unterminated array")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			if p.discard {
				return nil, nil
			}
			return a, nil
		default:
			return nil, p.err(ErrSyntax, "expected ',' or ']'")
		}
	}
}

func hexval(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// common holds member names and values frequent in custody records, so
// parsing them does not allocate.
var common = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"v", "log", "index", "run", "run_seq", "prev", "type", "time", "body",
		"key_id", "sig", "args_commitment", "tool", "effect", "rules", "reason", "policy_hash", "call",
		"allow", "deny", "ask", ""} {
		m[s] = s
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := common[string(b)]; ok { // no allocation for the lookup
		return s
	}
	return string(b)
}

// canonicalEscape reports whether the escape \e starting just before p.i is
// the one AppendString writes.
func (p *parser) canonicalEscape(e byte) bool {
	switch e {
	case '"', '\\', 'b', 't', 'n', 'f', 'r':
		return true
	case 'u':
		// Only \u00xx, lowercase, for a control character without shorthand.
		if p.i+4 > len(p.b) || p.b[p.i] != '0' || p.b[p.i+1] != '0' {
			return false
		}
		h, l := hexval(p.b[p.i+2]), hexval(p.b[p.i+3])
		if h < 0 || l < 0 || h > 1 || p.b[p.i+3] >= 'A' && p.b[p.i+3] <= 'F' {
			return false
		}
		switch c := h<<4 | l; c {
		case '\b', '\t', '\n', '\f', '\r':
			return false
		}
		return true
	}
	return false
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.b) {
		return 0, p.err(ErrSyntax, "short \\u escape")
	}
	var r rune
	for k := 0; k < 4; k++ {
		h := hexval(p.b[p.i+k])
		if h < 0 {
			return 0, p.err(ErrSyntax, "bad \\u escape")
		}
		r = r<<4 | h
	}
	p.i += 4
	return r, nil
}

func (p *parser) string() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes.
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			if !utf8.Valid(s) {
				return "", &Error{Offset: start, Err: ErrUTF8}
			}
			p.i++
			if p.discard && len(s) > 0 {
				return unsafe.String(&s[0], len(s)), nil
			}
			return intern(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.err(ErrSyntax, "control character in string")
		}
		p.i++
	}
	if !utf8.Valid(p.b[start:p.i]) {
		return "", &Error{Offset: start, Err: ErrUTF8}
	}
	return p.escapedString(start)
}

// escapedString continues string from the first escape or the end of input,
// p.b[start:p.i] being the characters before it.
func (p *parser) escapedString(start int) (string, error) {
	buf := append([]byte(nil), p.b[start:p.i]...)
	// In canonical mode, the offset of the first escape AppendString would
	// not write; reported once the string is known to be well-formed, so
	// that a malformed escape (e.g. a lone surrogate) is reported first.
	notCanonical := -1
	for {
		if p.i >= len(p.b) {
			return "", p.err(ErrSyntax, "unterminated string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if notCanonical >= 0 {
				return "", &Error{Offset: notCanonical, Err: ErrNotCanonical, Detail: "escape"}
			}
			return string(buf), nil
		case c < 0x20:
			return "", p.err(ErrSyntax, "control character in string")
		case c == '\\':
			at := p.i
			p.i++
			if p.i >= len(p.b) {
				return "", p.err(ErrSyntax, "unterminated escape")
			}
			e := p.b[p.i]
			p.i++
			if p.canon && notCanonical < 0 && !p.canonicalEscape(e) {
				notCanonical = at
			}
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xdc00 || p.i+6 > len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
						return "", &Error{Offset: at, Err: ErrSurrogate}
					}
					p.i += 2
					r2, err := p.hex4()
					if err != nil {
						return "", err
					}
					if r2 < 0xdc00 || r2 > 0xdfff {
						return "", &Error{Offset: at, Err: ErrSurrogate}
					}
					r = utf16.DecodeRune(r, r2)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", &Error{Offset: at, Err: ErrSyntax, Detail: "bad escape"}
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.err(ErrUTF8, "")
			}
			buf = append(buf, p.b[p.i:p.i+size]...)
			p.i += size
		}
	}
}

// Append appends the RFC 8785 canonical encoding of v to dst. v must be built
// from the types Parse returns; int variants (int, int32, uint32) are
// accepted for convenience. Integers outside ±(2^53-1), doubles Parse
// would refuse as written (wrapping ErrNumber), NaN, infinities and other
// types fail with ErrUnsupported, as do strings and member names that
// are not valid UTF-8 (also wrapping ErrUTF8); nesting Parse would refuse
// (more than MaxDepth arrays and objects) fails with ErrDepth.
func Append(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v, 0)
}

// appendValue appends v, which sits inside depth arrays and objects.
func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	switch v.(type) {
	case []any, map[string]any:
		if depth >= MaxDepth { // as Parse's value
			return nil, ErrDepth
		}
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if v {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		if !utf8.ValidString(v) {
			return nil, errInvalidUTF8
		}
		return AppendString(dst, v), nil
	case int64:
		return appendInt(dst, v)
	case int:
		return appendInt(dst, int64(v))
	case int32:
		return appendInt(dst, int64(v))
	case uint32:
		return appendInt(dst, int64(v))
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, v)
		}
		return appendNumber(dst, v)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			if !utf8.ValidString(k) {
				return nil, errInvalidUTF8
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, CompareUTF16)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendValue(dst, v[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	default:
		return nil, fmt.Errorf("%w: %T", ErrUnsupported, v)
	}
}

// errInvalidUTF8 is Append's error for a string or member name that is not
// valid UTF-8: AppendString would copy it as is, which no parser reads as
// written, and CompareUTF16 cannot order such names.
var errInvalidUTF8 = fmt.Errorf("%w: string: %w", ErrUnsupported, ErrUTF8)

func appendInt(dst []byte, n int64) ([]byte, error) {
	if n > MaxSafeInteger || n < -MaxSafeInteger {
		return nil, fmt.Errorf("%w: %d: %w", ErrUnsupported, n, ErrNumber)
	}
	return strconv.AppendInt(dst, n, 10), nil
}

// AppendString appends the RFC 8785 encoding of s (which must be valid
// UTF-8) to dst: '"' and '\' are escaped, control characters use \b \t \n \f
// \r or \u00xx with lowercase hex, everything else is copied as UTF-8.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(dst, '"')
}

// CompareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// section 3.2.3 requires for object member names.
func CompareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := utf16Unit(ra), utf16Unit(rb)
			if ua != ub {
				if ua < ub {
					return -1
				}
				return 1
			}
			// Same high surrogate: compare low surrogates.
			_, la := utf16.EncodeRune(ra)
			_, lb := utf16.EncodeRune(rb)
			if la < lb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}

func utf16Unit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// Canonicalize strictly parses b and returns its canonical encoding.
func Canonicalize(b []byte) ([]byte, error) {
	v, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return Append(nil, v)
}
