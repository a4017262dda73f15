package metering

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentcustody/custody/internal/tooluse"
)

// FINDING (medium, budget bypass, same class as the round-5 NUL fix):
// bodyModel and providerreach now cut a member name at a NUL ("a parser
// that keeps names as C strings reads "tools\u0000x" as "tools""), but
// the meter's find/Inspect do not: "max_tokens\u0000" is another member
// to it, while to such a parser (cJSON: first match wins) it IS
// max_tokens. {"max_tokens\u0000":100000,...,"max_tokens":10} is metered
// and reserved as 10 output tokens and runs with 100000; "n\u0000":128
// is metered as one choice; "stream\u0000":true as no stream. Should:
// find counts a name cut at a NUL as that name (a dup, so the body is
// not OK), as bodyModel and normName do.
func TestAttack6MeterNULNames(t *testing.T) {
	for _, c := range []struct {
		f    tooluse.Format
		body string
	}{
		{tooluse.Anthropic, `{"max_tokens\u0000":100000,"model":"claude","max_tokens":10,"messages":[]}`},
		{tooluse.Anthropic, `{"model":"claude","max_tokens":10,"stream\u0000x":true,"messages":[]}`},
		{tooluse.OpenAIChat, `{"model":"gpt","n\u0000":128,"max_completion_tokens":10,"messages":[]}`},
		{tooluse.OpenAIChat, `{"max_tokens\u0000":100000,"model":"gpt","max_completion_tokens":10,"messages":[]}`},
		{tooluse.OpenAIResponses, `{"max_output_tokens\u0000":100000,"model":"gpt","max_output_tokens":10,"input":"x"}`},
	} {
		ri := Inspect(c.f, []byte(c.body))
		if ri.OK {
			t.Errorf("Inspect(%s) OK, MaxOutput %d, Choices %d, Stream %v; a C-string parser reads the NUL-suffixed member as the metered one", c.body, ri.MaxOutput, ri.Choices, ri.Stream)
		}
	}
}

// exactLast reads name from the top level of b as a Python or
// JavaScript parser does (exact name, the last wins).
func exactLast(b []byte, name string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil, false
	}
	// encoding/json's map decoding is exact-name and last-wins.
	v, ok := m[name]
	return v, ok
}

// HELD: for bodies spelled to make jsontext and an exact, last-wins
// parser disagree (escaped names, duplicates in another case, the long
// s and Kelvin sign, whitespace, invalid UTF-8 around, nested
// look-alikes, big and odd numbers), whenever Inspect is OK it reads
// max_tokens, n and stream as that parser does.
func TestAttack6MeterAgreesWithExactParser(t *testing.T) {
	for _, b := range []string{
		`{"model":"m","max\u005ftokens":10,"messages":[]}`,
		`{"model":"m","max_tokens":10,"max\u005ftokens":100000}`,
		`{"model":"m","max_tokens":10,"MAX_TOKENS":100000}`,
		`{"model":"m","max_to\u212aens":100000,"max_tokens":10}`,
		`{"model":"m","ſtream":true,"stream":false,"max_tokens":10}`,
		`{"model":"m","max_tokens" : 10 , "n" : 3 }`,
		"{\"model\":\"\xff\",\"max_tokens\":10,\"x\xff\":1}",
		`{"model":"m","max_tokens":10,"metadata":{"max_tokens":100000,"n":100}}`,
		`{"model":"m","max_tokens":1e5}`,
		`{"model":"m","max_tokens":10.0}`,
		`{"model":"m","max_tokens":-0}`,
		`{"model":"m","max_tokens":"100000"}`,
		`{"model":"m","max_tokens":9007199254740993}`,
		`{"model":"m","max_tokens":10,"n":null,"stream":null}`,
		`{"model":"m","max_tokens":10}` + "\n\t ",
		`{"model":"m","max_tokens":10} {"max_tokens":100000}`,
		"\ufeff" + `{"model":"m","max_tokens":10}`,
		`{"model":"m","max_tokens":10,"x":"\ud800"}`,
		`{"model":"m","n":2,"max_completion_tokens":10,"max_tokens":20}`,
	} {
		for _, f := range []tooluse.Format{tooluse.Anthropic, tooluse.OpenAIChat} {
			ri := Inspect(f, []byte(b))
			if !ri.OK {
				continue
			}
			var max, n int64
			if v, ok := exactLast([]byte(b), "max_tokens"); ok && string(v) != "null" {
				json.Unmarshal(v, &max)
			}
			if f == tooluse.OpenAIChat {
				if v, ok := exactLast([]byte(b), "max_completion_tokens"); ok {
					var a int64
					json.Unmarshal(v, &a)
					max = maxOf(max, a)
				}
			}
			n = 1
			if v, ok := exactLast([]byte(b), "n"); ok && f == tooluse.OpenAIChat && string(v) != "null" {
				json.Unmarshal(v, &n)
			}
			var stream bool
			if v, ok := exactLast([]byte(b), "stream"); ok {
				json.Unmarshal(v, &stream)
			}
			if max > 0 && ri.MaxOutput != max*max1(n) || stream != ri.Stream {
				t.Errorf("%v %q: Inspect max %d stream %v; exact parser max %d x n %d, stream %v", f, b, ri.MaxOutput, ri.Stream, max, n, stream)
			}
		}
	}
}

// HELD: members, Inspect and the rewrites leave the held bytes as they
// were (jsontext over a bytes.Buffer parses in place and must not
// unescape into it).
func TestAttack6MeterDoesNotMutate(t *testing.T) {
	b := []byte(`{"model":"m\u0041\n\"","max_tokens":10,"stream":true,"stream_options":{"include\u005fusage":false},"messages":[{"content":"\u00e9\ud83d\ude00\\\/"}],"generationConfig":{"maxOutputTokens":5}}`)
	orig := bytes.Clone(b)
	members(b)
	for _, f := range []tooluse.Format{tooluse.Anthropic, tooluse.OpenAIChat, tooluse.OpenAIResponses, tooluse.Gemini} {
		Inspect(f, b)
		SetMaxOutput(f, b, 7)
	}
	AddIncludeUsage(b)
	if !bytes.Equal(b, orig) {
		t.Errorf("body changed:\n%s\n%s", orig, b)
	}
}
