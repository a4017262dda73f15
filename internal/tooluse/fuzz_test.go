package tooluse

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzScanner checks that no body makes a Scanner panic, that the
// Result does not depend on how the body is split, and that it keeps its
// bounds.
func FuzzScanner(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(tc.body), uint8(tc.f), tc.ct == ctSSE, uint64(7))
		f.Add([]byte(lineEnds(tc.body, "\r\n")), uint8(tc.f), tc.ct == ctSSE, uint64(31))
	}
	f.Fuzz(func(t *testing.T, body []byte, format uint8, stream bool, seed uint64) {
		fm := Format(format%4 + 1)
		ct := ctJSON
		if stream {
			ct = ctSSE
		}
		lim := Limits{MaxUses: 1 + int(seed%4), MaxArgs: 16 + int(seed>>2%1024), MaxJSON: 128 + int(seed>>12%4096)}
		whole := NewScanner(fm, ct, lim)
		whole.Write(body)
		want := whole.Result()

		// Split where the seed says: piece sizes from its bits.
		split := NewScanner(fm, ct, lim)
		rest, x := body, seed|1
		for len(rest) > 0 {
			n := min(len(rest), int(x%17))
			x = x*6364136223846793005 + 1442695040888963407
			split.Write(rest[:n])
			rest = rest[n:]
		}
		if got := split.Result(); !same(got, want) {
			t.Fatalf("split by seed %d: Result() =\n%s\nwant\n%s", seed, show(got), show(want))
		}

		if len(want.Uses) > lim.MaxUses {
			t.Errorf("%d uses, want at most %d", len(want.Uses), lim.MaxUses)
		}
		for _, u := range want.Uses {
			if (u.Malformed || u.Truncated) != (u.Args == nil) {
				t.Errorf("use %+v: Args must be nil exactly when Malformed or Truncated", u)
			}
			if u.Args != nil && !json.Valid(u.Args) {
				t.Errorf("use %+v: Args not JSON", u)
			}
			if len(u.ID) > maxName || len(u.Name) > maxName {
				t.Errorf("use id or name over %d bytes", maxName)
			}
		}
	})
}

// FuzzSkip checks that an event the scanner skips unparsed (a text
// delta) is one whose parsing would have had no effect.
func FuzzSkip(f *testing.F) {
	for _, bb := range benchBodies() {
		for _, line := range strings.Split(string(bb.body), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if d, ok := strings.CutPrefix(line, "data: "); ok && len(d) < 2000 {
				f.Add([]byte(d))
			}
		}
	}
	for _, c := range geminiChunks {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm\u00e9\n"}}`))
	f.Add([]byte(`{"id":"c","choices":[{"index":0,"delta":{"content":null,"role":"assistant","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`))
	f.Add([]byte(`{ "type" : "response.refusal.delta" , "logprobs" : [ ] , "delta" : "no" }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if isAnthTextDelta(data) {
			var e anthEvent
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("isAnthTextDelta(%q), but it does not parse: %v", data, err)
			}
			if e.Type != "content_block_delta" || e.Index == nil || e.Delta == nil ||
				e.Delta.Type != "text_delta" && e.Delta.Type != "thinking_delta" ||
				e.Message != nil || e.ContentBlock != nil || e.Usage != nil || e.Error != nil {
				t.Fatalf("isAnthTextDelta(%q), but it parses as %+v", data, e)
			}
		}
		if chatTextChunk.matches(data) {
			var r chatResponse
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("chatTextChunk matches %q, but it does not parse: %v", data, err)
			}
			if r.Usage != nil || r.Error != nil {
				t.Fatalf("chatTextChunk matches %q, but it parses as %+v", data, r)
			}
			for _, c := range r.Choices {
				if c.FinishReason != nil || c.Message != nil || c.Delta != nil && (c.Delta.ToolCalls != nil || c.Delta.FunctionCall != nil) {
					t.Fatalf("chatTextChunk matches %q, but it parses as %+v", data, r)
				}
			}
		}
		if ok, c := geminiTextChunk.capture(data); ok {
			var r geminiResponse
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("geminiTextChunk matches %q, but it does not parse: %v", data, err)
			}
			if r.Error != nil {
				t.Fatalf("geminiTextChunk matches %q, but it parses as %+v", data, r)
			}
			for _, cd := range r.Candidates {
				if cd.FinishReason != "" {
					t.Fatalf("geminiTextChunk matches %q, but it has a finishReason", data)
				}
				if cd.Content != nil {
					for _, p := range cd.Content.Parts {
						if p.FunctionCall != nil {
							t.Fatalf("geminiTextChunk matches %q, but it has a functionCall", data)
						}
					}
				}
			}
			var u *geminiUsage
			if span := c[1]; span[1] > 0 {
				u = new(geminiUsage)
				if err := json.Unmarshal(data[span[0]:span[1]], u); err != nil {
					t.Fatalf("geminiTextChunk captures usage %q, which does not parse: %v", data[span[0]:span[1]], err)
				}
			}
			if !reflect.DeepEqual(u, r.UsageMetadata) {
				t.Fatalf("geminiTextChunk captures usage %+v, parsing gives %+v", u, r.UsageMetadata)
			}
		}
		if respTextDelta.matches(data) {
			var e respEvent
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("respTextDelta matches %q, but it does not parse: %v", data, err)
			}
			if !strings.HasSuffix(e.Type, ".delta") || strings.Contains(e.Type, "call") ||
				e.Item != nil || e.Response != nil || e.Error != nil || e.Arguments != nil || e.Input != nil || e.Code != nil {
				t.Fatalf("respTextDelta matches %q, but it parses as %+v", data, e)
			}
		}
	})
}
