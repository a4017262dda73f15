package verify_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentcustody/custody/verify"
)

type strictInner struct {
	Name string `json:"name"`
}

type strictBase struct {
	Run string `json:"run"`
}

type strictOuter struct {
	strictBase
	Tool  string            `json:"tool"`
	Args  json.RawMessage   `json:"args,omitempty"`
	Items []strictInner     `json:"items,omitempty"`
	One   *strictInner      `json:"one,omitempty"`
	ByKey map[string]string `json:"by_key,omitempty"`
	Blob  []byte            `json:"blob,omitempty"`
	Skip  string            `json:"-"`
	Plain int
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		in      string
		wantErr error
	}{
		{`{"run":"r","tool":"Bash","args":{"ANY":[1.5,{"Names":true}]},"items":[{"name":"a"}],"one":{"name":"b"},"by_key":{"X":"y"},"blob":"AAE=","Plain":3}`, nil},
		{` { "tool" : "Bash" } `, nil},
		{`{"tool":"Bash","tool":"Deploy"}`, verify.ErrDuplicateKey},
		{`{"tool":"Bash","args":{},"args":{"x":1}}`, verify.ErrDuplicateKey},
		{`{"tool":"Bash","args":{"a":1,"a":2}}`, verify.ErrDuplicateKey},
		{`{"Tool":"Bash"}`, verify.ErrUnknownMember},
		{`{"ARGS":{}}`, verify.ErrUnknownMember},
		{`{"Run":"r"}`, verify.ErrUnknownMember},
		{`{"tool":"Bash","extra":1}`, verify.ErrUnknownMember},
		{`{"items":[{"name":"a"},{"NAME":"b"}]}`, verify.ErrUnknownMember},
		{`{"one":{"nAme":"b"}}`, verify.ErrUnknownMember},
		{`{"plain":1}`, verify.ErrUnknownMember},
		{`{"Skip":"x"}`, verify.ErrUnknownMember},
		{`{"-":"x"}`, verify.ErrUnknownMember},
		{`{"tool":"Bash"} {}`, verify.ErrMalformedJSON},
		{`{"tool":"\ud800"}`, verify.ErrSurrogate},
		{"{\"tool\":\"\xff\"}", verify.ErrUTF8},
		{`{"tool":1}`, verify.ErrMalformedJSON},
		{`{"Plain":9007199254740993}`, verify.ErrNumber},
	}
	for _, tt := range tests {
		var v strictOuter
		err := verify.DecodeJSON([]byte(tt.in), &v)
		if tt.wantErr == nil {
			if err != nil {
				t.Errorf("DecodeJSON(%s) = %v", tt.in, err)
			}
			continue
		}
		if !errors.Is(err, tt.wantErr) || !errors.Is(err, verify.ErrMalformedJSON) {
			t.Errorf("DecodeJSON(%s) = %v, want %v", tt.in, err, tt.wantErr)
		}
	}
	if err := verify.DecodeJSON([]byte(`{}`), nil); err == nil {
		t.Error("DecodeJSON into nil succeeded")
	}
	var v strictOuter
	err := verify.DecodeJSON([]byte(`{"items":[{"name":"a"},{"NAME":"b"}]}`), &v)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"items.[1].NAME"`)) {
		t.Errorf("DecodeJSON error %v does not name items.[1].NAME", err)
	}
}

// TestParseTrustCaseFolded: encoding/json would read "LOG" as "log" and
// "KEY_ID" as "key_id"; trust.json is read strictly.
func TestParseTrustCaseFolded(t *testing.T) {
	f := newFixture(t)
	good, err := f.trust.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range [][2]string{{`"log"`, `"LOG"`}, {`"key_id"`, `"KEY_ID"`}, {`"witness_quorum"`, `"witness_Quorum"`}} {
		bad := bytes.Replace(good, []byte(edit[0]), []byte(edit[1]), 1)
		if _, err := verify.ParseTrust(bad); !errors.Is(err, verify.ErrInvalidTrust) || !errors.Is(err, verify.ErrUnknownMember) {
			t.Errorf("ParseTrust with %s = %v, want ErrInvalidTrust and ErrUnknownMember", edit[1], err)
		}
	}
}

// FuzzDecodeJSON: DecodeJSON accepts a subset of what encoding/json
// accepts, with the same result, and never panics.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"run":"r","tool":"Bash","args":{"a":[1.5,null]},"items":[{"name":"a"}]}`,
		`{"tool":"a","tool":"b"}`, `{"TOOL":"a"}`, `{"one":{"name":"x"},"by_key":{"K":"v"},"blob":"AAE=","Plain":-3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var strict, loose strictOuter
		if err := verify.DecodeJSON(b, &strict); err != nil {
			return
		}
		if err := json.Unmarshal(b, &loose); err != nil {
			t.Fatalf("DecodeJSON(%q) accepted what encoding/json refuses: %v", b, err)
		}
		s, _ := json.Marshal(strict)
		l, _ := json.Marshal(loose)
		if !bytes.Equal(s, l) {
			t.Fatalf("DecodeJSON(%q) = %s, encoding/json %s", b, s, l)
		}
	})
}
