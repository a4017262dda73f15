package jcs

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{`{"b":1, "a":[true,false,null,"x"]}`, `{"a":[true,false,null,"x"],"b":1}`, nil},
		// RFC 8785 section 3.2.3 sorting example (UTF-16 code unit order).
		{`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}", nil},
		{`"\u0000\u001f\b\t\n\f\r\"\\\/\u00e9\u2028"`, "\"\\u0000\\u001f\\b\\t\\n\\f\\r\\\"\\\\/é\u2028\"", nil},
		{`9007199254740991`, `9007199254740991`, nil},
		{`-9007199254740991`, `-9007199254740991`, nil},
		// The call from issue 8 that was undecidable.
		{`{"b":1,"a":[1.0,"é",1e21]}`, `{"a":[1,"é",1e+21],"b":1}`, nil},
		{`9007199254740992`, `9007199254740992`, nil},
		{`9007199254740993`, ``, ErrNumber}, // would canonicalize to ...992
		{`12345678901234567890`, ``, ErrNumber},
		{`1e400`, ``, ErrNumber},
		{`1e-400`, ``, ErrNumber},
		{`0.30000000000000000001`, ``, ErrNumber},
		{`1.0`, `1`, nil},
		{`1e3`, `1000`, nil},
		{`1E+3`, `1000`, nil},
		{`-0`, ``, ErrNumber},
		{`-0.0`, ``, ErrNumber},
		{`0.0`, `0`, nil},
		{`0e-5`, `0`, nil},
		{`1.`, ``, ErrSyntax},
		{`.5`, ``, ErrSyntax},
		{`1e`, ``, ErrSyntax},
		{`1e+`, ``, ErrSyntax},
		{`+1`, ``, ErrSyntax},
		{`0x10`, ``, ErrSyntax},
		{`1_0`, ``, ErrSyntax},
		{`NaN`, ``, ErrSyntax},
		{`Infinity`, ``, ErrSyntax},
		{`01`, ``, ErrSyntax},
		{`{"a":1,"a":2}`, ``, ErrDuplicateKey},
		{`{"a":1,"\u0061":2}`, ``, ErrDuplicateKey},
		{`"\ud800"`, ``, ErrSurrogate},
		{`"\udc00\ud800"`, ``, ErrSurrogate},
		{`"\ud800\u0041"`, ``, ErrSurrogate},
		{"\"\xed\xa0\x80\"", ``, ErrUTF8},
		{"\"\xff\"", ``, ErrUTF8},
		{"\"a\\n\xff\"", ``, ErrUTF8},
		{`{} {}`, ``, ErrSyntax},
		{`[1,]`, ``, ErrSyntax},
		{"\"\t\"", ``, ErrSyntax},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Canonicalize(%q) = %q, %v; want %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseCanonical(t *testing.T) {
	for _, in := range []string{`{"b":1,"a":2}`, `{ "a":1}`, `{"a":"\/"}`, `"\u0041"`, `"\u000A"`, `"\u000a"`, `"\u001F"`, `[1, 2]`,
		`1.0`, `1e3`, `1e21`, `1E+21`, `0.5e-6`, `1.5E+300`, `0.0`} {
		if _, err := ParseCanonical([]byte(in)); !errors.Is(err, ErrNotCanonical) {
			t.Errorf("ParseCanonical(%q) = %v, want ErrNotCanonical", in, err)
		}
	}
	for _, in := range []string{`{"a":1,"b":[true,null,"\u001f\n\""]}`, `{}`, `[]`, `"\u0000"`,
		`[1.5,1e+21,5e-7,-0.000001,9007199254740992,1.7976931348623157e+308]`} {
		if _, err := ParseCanonical([]byte(in)); err != nil {
			t.Errorf("ParseCanonical(%q) = %v", in, err)
		}
	}
}

func TestDepth(t *testing.T) {
	deep := make([]byte, 0, 2*MaxDepth+2)
	for range MaxDepth + 1 {
		deep = append(deep, '[')
	}
	for range MaxDepth + 1 {
		deep = append(deep, ']')
	}
	if _, err := Parse(deep); !errors.Is(err, ErrDepth) {
		t.Errorf("Parse(%d nested arrays) = %v, want ErrDepth", MaxDepth+1, err)
	}
	if _, err := Parse(deep[1 : len(deep)-1]); err != nil {
		t.Errorf("Parse(%d nested arrays) = %v", MaxDepth, err)
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"a":[1,"\ud83d\ude00",{"b":null}]}`, `"\u00e9"`, `-12`, `{"a":1,"a":2}`,
		`[1.0,1e21,-5e-324,0.1,123456789012345678]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Canonicalize(b)
		if err != nil {
			return
		}
		c2, err := Canonicalize(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("Canonicalize not idempotent: %q -> %q -> %q, %v", b, c, c2, err)
		}
		// ParseCanonical accepts exactly the canonical encodings.
		if _, err := ParseCanonical(c); err != nil {
			t.Fatalf("ParseCanonical(%q) = %v", c, err)
		}
		if _, err := ParseCanonical(b); (err == nil) != (string(b) == string(c)) {
			t.Fatalf("ParseCanonical(%q) = %v, canonical form %q", b, err, c)
		}
	})
}
