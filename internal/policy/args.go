package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxArgsDepth bounds the nesting of call arguments.
const maxArgsDepth = 64

// decodeArgs decodes a call's arguments: one JSON object with unique keys
// (or nothing, or null). Integral numbers that fit become int64, others
// float64. Errors wrap [ErrInvalidArgs].
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgs, err)
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidArgs)
	}
	v, err := decodeObject(dec, 1)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgs, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the object", ErrInvalidArgs)
	}
	return v, nil
}

func decodeObject(dec *json.Decoder, depth int) (map[string]any, error) {
	m := map[string]any{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			return m, nil
		}
		k, ok := tok.(string)
		if !ok {
			return nil, errors.New("object key is not a string")
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		v, err := decodeValue(dec, depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxArgsDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return decodeObject(dec, depth+1)
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", t)
		}
		return f, nil
	default: // string, bool, nil
		return t, nil
	}
}

// Destination-bearing argument names (lower case). A string (or an
// integral number, as its decimal string) under a strong key is always
// classified; a string under a weak key only when it looks like a host.
var (
	strongKeys = map[string]bool{"url": true, "uri": true, "endpoint": true, "host": true, "hostname": true}
	weakKeys   = map[string]bool{"address": true, "target": true}
)

const (
	// maxDestDepth is maxArgsDepth: every level arguments may have is
	// inspected, so nesting cannot hide a destination.
	maxDestDepth   = maxArgsDepth
	maxDestStrings = 10000
)

// findDestinations returns the destinations named in args, in a stable
// order (map keys sorted).
func findDestinations(args map[string]any) []Destination {
	f := finder{budget: maxDestStrings}
	f.walk("", args, 0)
	if f.budget < 0 {
		f.out = append(f.out, ambiguous("arguments too large to inspect"))
	}
	return f.out
}

type finder struct {
	out       []Destination
	budget    int
	textDests int // destinations taken from free text, up to maxTextDests
}

func (f *finder) walk(key string, v any, depth int) {
	if depth > maxDestDepth || f.budget < 0 {
		return
	}
	switch v := v.(type) {
	case string:
		f.budget--
		if f.budget < 0 {
			return
		}
		f.str(key, v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f.walk(k, v[k], depth+1)
		}
	case []any:
		for _, x := range v {
			f.walk(key, x, depth+1)
		}
	case int64:
		f.number(key, v)
	case float64:
		// JavaScript prints an integral float as an integer:
		// `${2852039166.0}` is "2852039166".
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			f.number(key, int64(v))
		}
	}
}

// number classifies an integer under a strong key as its decimal string:
// a tool may format an integer host into a URL ("http://2852039166/" is
// 169.254.169.254).
func (f *finder) number(key string, v int64) {
	if !strongKeys[strings.ToLower(key)] {
		return
	}
	f.budget--
	if f.budget < 0 {
		return
	}
	f.str(key, strconv.FormatInt(v, 10))
}

func (f *finder) str(key, s string) {
	if s == "" {
		return
	}
	k := strings.ToLower(key)
	d := Destination{Kind: KindNone}
	switch {
	case strongKeys[k]:
		d = classifyArg(s)
	case hasURLScheme(s):
		d = ClassifyURL(s)
	case weakKeys[k] && hostish(s):
		d = classifyArg(s)
	}
	if d.Kind != KindNone {
		f.out = append(f.out, d)
	}
	// A value is also free text unless it is, as a whole, a metadata
	// endpoint already: "http://github.com/;curl${IFS}169.254.169.254/"
	// is one public URL to a URL parser and two commands to a shell.
	if d.Kind != KindMetadata {
		f.text(s)
	}
}

// classifyArg classifies a value that names a destination: a bare IPv6
// address, or anything ClassifyURL takes.
func classifyArg(s string) Destination {
	if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
		return ClassifyHost(s)
	}
	return ClassifyURL(s)
}

// hasURLScheme reports whether s starts with "scheme:" followed by two
// characters each / or \.
func hasURLScheme(s string) bool {
	i := strings.IndexByte(s, ':')
	if i <= 0 || len(s) < i+3 || !validScheme(s[:i]) {
		return false
	}
	return (s[i+1] == '/' || s[i+1] == '\\') && (s[i+2] == '/' || s[i+2] == '\\')
}

// hostish reports whether a value under a weak key looks like a host,
// leading and trailing whitespace aside: a tool may trim it, and
// inet_aton skips it (the value is then classified as given, which makes
// the whitespace ambiguous).
func hostish(s string) bool {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	if strings.ContainsAny(s, ".:/[%@\\") || numericLabel(s) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	l := strings.ToLower(s)
	return l == "localhost" || metadataNames[l]
}
