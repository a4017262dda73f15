package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// refBodyModel is bodyModel on encoding/json tokens (with the same rules
// on names), kept as the reference the jsontext one must agree with.
func refBodyModel(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	model, found := "", false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		name, _ := t.(string)
		key, _, _ := strings.Cut(name, "\x00")
		if n := foldName(key); n != "model" && otherModel(n) {
			return ""
		}
		if foldName(key) == "model" {
			if found || name != "model" || dec.Decode(&model) != nil {
				return ""
			}
			found = true
			continue
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return ""
	}
	if _, err := dec.Token(); err != io.EOF {
		return ""
	}
	return model
}

func TestBodyModel(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model":"a"}`, "a"},
		{` {"x":[1,{"model":"b"}],"model":"a"} `, "a"},
		{`{"mod\u0065l":"a\u00e9"}`, "aé"},
		{`{"model":"a","model":"a"}`, ""},
		{`{"model":"a","MODEL":"b"}`, ""},
		{`{"Model":"a"}`, ""},
		{`{"model":"a","fallbacks":["b"]}`, ""},
		{`{"Models":["b"],"model":"a"}`, ""},
		{`{"model":1}`, ""},
		{`{"model":null}`, ""},
		{`{"model":"a"} x`, ""},
		{`{"model":"a"}{}`, ""},
		{`{"model":"a"`, ""},
		{`{"model":"a","x":}`, ""},
		{"{\"model\":\"a\xff\"}", ""},
		{"{\"x\":\"\xff\",\"model\":\"a\"}", "a"},
		{`[{"model":"a"}]`, ""},
		{``, ""},
	} {
		if got := bodyModel([]byte(c.body)); got != c.want {
			t.Errorf("bodyModel(%q) = %q, want %q", c.body, got, c.want)
		}
	}
}

// FuzzBodyModel: a model is only ever reported for a JSON object whose
// one "model" member (no other spelling of it) is that string, and the
// answer is the reference's, except that a model that is not valid UTF-8
// is refused.
func FuzzBodyModel(f *testing.F) {
	for _, s := range []string{`{"model":"a"}`, `{"model":"a","model":"b"}`, `{"Model":"a"}`, `{"x":[1,{"model":"b"}],"model":"a"}`,
		`[]`, `{"model":1}`, `{"model":"a"} x`, `{"mod\u0065l":"a"}`, ``, "{\"model\":\"\xff\"}", `{"models":[],"model":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ref := bodyModel(b), refBodyModel(b)
		if m != ref && (m != "" || utf8.ValidString(ref) && utf8.Valid(b)) {
			t.Fatalf("bodyModel(%q) = %q, the reference %q", b, m, ref)
		}
		if m == "" {
			return
		}
		var v map[string]json.RawMessage
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("bodyModel(%q) = %q, but the body is not a JSON object: %v", b, m, err)
		}
		var got string
		if err := json.Unmarshal(v["model"], &got); err != nil || got != m {
			t.Fatalf("bodyModel(%q) = %q, want %q", b, m, got)
		}
		for k := range v {
			if k != "model" && strings.EqualFold(k, "model") {
				t.Fatalf("bodyModel(%q) = %q despite member %q", b, m, k)
			}
		}
	})
}

// BenchmarkBodyModel: finding the model of a 45 KB agent request, against
// the encoding/json reference in the same run.
func BenchmarkBodyModel(b *testing.B) {
	body := []byte(`{"messages":[` + strings.Repeat(`{"role":"user","content":[{"type":"text","text":"`+strings.Repeat("lorem ipsum ", 30)+`"}]},`, 120) +
		`{"role":"user","content":"go on"}],"max_tokens":1024,"model":"claude-sonnet-4-5"}`)
	for _, c := range []struct {
		name string
		f    func([]byte) string
	}{{"jsontext", bodyModel}, {"encoding-json", refBodyModel}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if c.f(body) != "claude-sonnet-4-5" {
					b.Fatal("no model")
				}
			}
		})
	}
}
