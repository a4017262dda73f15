package metering

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"testing"
	"unicode/utf8"
)

// refMembers is members as it was written on encoding/json, kept as the
// reference the jsontext one must agree with.
func refMembers(b []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		out = append(out, member{name: name, start: end - len(raw), end: end})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return out, true
}

// FuzzMembers: the members of a body, and where their values are, are
// the reference's for every body of valid UTF-8 (on other bytes the two
// may differ in a name's replacement characters only); members never
// reads a body the reference refuses.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,{"c":2}], "d" : "x" }`, `{}`, ` {"a":{}} `, `{"a":1}x`, `[1]`, `{"a":1,"a":2}`,
		`{"\u0061":"\ud800"}`, `{"a":1e400}`, "{\"a\xff\":1}", `{"a":01}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := members(b)
		want, wok := refMembers(b)
		if ok && !wok {
			t.Fatalf("members(%q) = %v, the reference refuses it", b, got)
		}
		if utf8.Valid(b) && (ok != wok || !slices.Equal(got, want)) {
			t.Fatalf("members(%q) = %v %v, the reference %v %v", b, got, ok, want, wok)
		}
	})
}
