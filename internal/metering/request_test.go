package metering

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/tooluse"
)

func TestInspect(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    tooluse.Format
		body string
		want RequestInfo
	}{
		{"anthropic", tooluse.Anthropic, `{"model":"m","max_tokens":300,"stream":true}`,
			RequestInfo{MaxOutput: 300, HasMaxOutput: true, Choices: 1, Stream: true, OK: true}},
		{"anthropic none", tooluse.Anthropic, `{"model":"m"}`, RequestInfo{Choices: 1, OK: true}},
		{"chat larger of two, times n", tooluse.OpenAIChat, `{"max_tokens":10,"max_completion_tokens":50,"n":3}`,
			RequestInfo{MaxOutput: 150, HasMaxOutput: true, Choices: 3, OK: true}},
		{"chat null max", tooluse.OpenAIChat, `{"max_tokens":null}`, RequestInfo{Choices: 1, OK: true}},
		{"chat stream include_usage", tooluse.OpenAIChat, `{"stream":true,"stream_options":{"include_usage":true}}`,
			RequestInfo{Choices: 1, Stream: true, StreamOptions: true, IncludeUsage: true, OK: true}},
		{"chat stream_options null", tooluse.OpenAIChat, `{"stream":true,"stream_options":null}`,
			RequestInfo{Choices: 1, Stream: true, StreamOptions: true, OK: true}},
		{"responses", tooluse.OpenAIResponses, `{"max_output_tokens":77}`,
			RequestInfo{MaxOutput: 77, HasMaxOutput: true, Choices: 1, OK: true}},
		{"gemini", tooluse.Gemini, `{"generationConfig":{"maxOutputTokens":40,"candidateCount":2}}`,
			RequestInfo{MaxOutput: 80, HasMaxOutput: true, Choices: 2, OK: true}},
		// What the provider could read differently is refused (not OK).
		{"duplicate max_tokens", tooluse.Anthropic, `{"max_tokens":1,"max_tokens":100000}`, RequestInfo{Choices: 1}},
		{"other case only", tooluse.OpenAIChat, `{"Max_Tokens":5}`, RequestInfo{Choices: 1}},
		{"string max", tooluse.OpenAIChat, `{"max_tokens":"5"}`, RequestInfo{Choices: 1}},
		{"negative max", tooluse.OpenAIChat, `{"max_tokens":-5}`, RequestInfo{Choices: 1}},
		{"fraction", tooluse.OpenAIChat, `{"max_tokens":5.5}`, RequestInfo{Choices: 1}},
		{"stream not bool", tooluse.OpenAIChat, `{"stream":"yes"}`, RequestInfo{Choices: 1}},
		{"not an object", tooluse.OpenAIChat, `[1]`, RequestInfo{Choices: 1}},
		{"trailing data", tooluse.OpenAIChat, `{"max_tokens":5} {}`, RequestInfo{Choices: 1}},
		{"gemini bad config", tooluse.Gemini, `{"generationConfig":[1]}`, RequestInfo{Choices: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Inspect(tc.f, []byte(tc.body)); got != tc.want {
				t.Errorf("Inspect(%s) = %+v, want %+v", tc.body, got, tc.want)
			}
		})
	}
}

func TestSetMaxOutput(t *testing.T) {
	for _, tc := range []struct {
		f          tooluse.Format
		body, want string
	}{
		{tooluse.OpenAIChat, `{"model":"m","messages":[]}`, `{"max_completion_tokens":64,"model":"m","messages":[]}`},
		{tooluse.OpenAIChat, `{"max_tokens":null}`, `{"max_tokens":64}`},
		{tooluse.OpenAIChat, `{}`, `{"max_completion_tokens":64}`},
		{tooluse.OpenAIResponses, ` { "input":"x" }`, ` {"max_output_tokens":64, "input":"x" }`},
		{tooluse.Gemini, `{"contents":[]}`, `{"generationConfig":{"maxOutputTokens":64},"contents":[]}`},
		{tooluse.Gemini, `{"generationConfig":{"temperature":0}}`, `{"generationConfig":{"maxOutputTokens":64,"temperature":0}}`},
		{tooluse.Gemini, `{"generationConfig":null}`, `{"generationConfig":{"maxOutputTokens":64}}`},
		{tooluse.Anthropic, `{"model":"m"}`, `{"model":"m"}`},
	} {
		got := string(SetMaxOutput(tc.f, []byte(tc.body), 64))
		if got != tc.want {
			t.Errorf("SetMaxOutput(%v, %s) = %s, want %s", tc.f, tc.body, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("SetMaxOutput(%s) is not JSON: %s", tc.body, got)
		}
		ri := Inspect(tc.f, []byte(got))
		if tc.f != tooluse.Anthropic && (!ri.OK || !ri.HasMaxOutput || ri.MaxOutput != 64) {
			t.Errorf("Inspect after SetMaxOutput(%s) = %+v", tc.body, ri)
		}
	}
}

func TestAddIncludeUsage(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"stream":true}`, `{"stream_options":{"include_usage":true},"stream":true}`},
		{`{"stream":true,"stream_options":null}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":true,"stream_options":{"include_usage":false}}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":true,"stream_options":{"x":1}}`, `{"stream":true,"stream_options":{"include_usage":true,"x":1}}`},
	} {
		got := string(AddIncludeUsage([]byte(tc.body)))
		if got != tc.want {
			t.Errorf("AddIncludeUsage(%s) = %s, want %s", tc.body, got, tc.want)
		}
		if ri := Inspect(tooluse.OpenAIChat, []byte(got)); !ri.OK || !ri.IncludeUsage {
			t.Errorf("Inspect after AddIncludeUsage(%s) = %+v", tc.body, ri)
		}
	}
}

func TestIsUsageOnlyChunk(t *testing.T) {
	for data, want := range map[string]bool{
		`{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`:       true,
		`{"id":"c","choices":null,"usage":{"prompt_tokens":3}}`:                           true,
		`{"id":"c","usage":{"prompt_tokens":3}}`:                                          true,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}`:        false,
		`{"id":"c","choices":[{"index":0,"delta":{}}],"usage":{"prompt_tokens":3}}`:       false,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"\"usage\""}}],"usage":null}`: false,
		`[DONE]`: false,
	} {
		if got := IsUsageOnlyChunk([]byte(data)); got != want {
			t.Errorf("IsUsageOnlyChunk(%s) = %v, want %v", data, got, want)
		}
	}
}

func TestCharge(t *testing.T) {
	res := tooluse.Result{HasUsage: true, Complete: true, Usage: tooluse.Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 5, CacheWriteTokens: 1}}
	reserved := Usage{1, 100, 500}
	if got, want := Charge(reserved, 200, tooluse.Anthropic, res), (Usage{1, 16, 20}); got != want {
		t.Errorf("complete anthropic: %+v, want %+v", got, want)
	}
	if got, want := Charge(reserved, 200, tooluse.OpenAIChat, res), (Usage{1, 10, 20}); got != want {
		t.Errorf("complete openai: %+v, want %+v", got, want)
	}
	cut := res
	cut.Complete = false
	if got, want := Charge(reserved, 200, tooluse.OpenAIChat, cut), (Usage{1, 100, 500}); got != want {
		t.Errorf("cut: %+v, want %+v", got, want)
	}
	if got, want := Charge(Usage{1, 5, 5}, 200, tooluse.OpenAIChat, cut), (Usage{1, 10, 20}); got != want {
		t.Errorf("cut over reservation: %+v, want %+v", got, want)
	}
	if got, want := Charge(reserved, 200, tooluse.OpenAIChat, tooluse.Result{Complete: true}), reserved; got != want {
		t.Errorf("complete without usage: %+v, want %+v", got, want)
	}
	if got, want := Charge(reserved, 429, tooluse.OpenAIChat, tooluse.Result{Complete: true}), (Usage{Requests: 1}); got != want {
		t.Errorf("429: %+v, want %+v", got, want)
	}
}

func TestPolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"tenants":{"a":{"period":"day","output_tokens":100}},
		"default_tenant":{"period":"month","requests":5},"run":{"input_tokens":9},"token":{"requests":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := mustTime(t, "2026-12-01T23:59:59Z")
	got := p.Budgets(Claims{JTI: "j", RunID: "r/1", Tenant: "a", Agent: "g", Token: Usage{Requests: 7, OutputTokens: 8}, Run: Usage{InputTokens: 4}}, now)
	want := []Budget{
		{BudgetKey{ScopeToken, "j", ""}, Usage{Requests: 3, OutputTokens: 8}},
		{BudgetKey{ScopeRun, "a/g/r%2F1", ""}, Usage{InputTokens: 4}},
		{BudgetKey{ScopeTenant, "a", "day:2026-12-01"}, Usage{OutputTokens: 100}},
	}
	if len(got) != len(want) {
		t.Fatalf("Budgets = %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("Budgets[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	other := p.Budgets(Claims{JTI: "k", Tenant: "b"}, now)
	if len(other) != 2 || other[1].Period != "month:2026-12" || other[1].Limit.Requests != 5 {
		t.Errorf("default tenant budgets = %+v", other)
	}
	// A token without a tenant does not escape the default tenant budget.
	if b := p.Budgets(Claims{JTI: "k"}, now); len(b) != 2 || b[1].Key != "" || b[1].Limit.Requests != 5 {
		t.Errorf("budgets of a token without a tenant = %+v", b)
	}
	if b := (Policy{}).Budgets(Claims{JTI: "k", Tenant: "b", RunID: "r"}, now); len(b) != 0 {
		t.Errorf("empty policy, no claims: %+v", b)
	}
	for _, bad := range []string{
		`{"tenants":{"a":{"period":"week","requests":1}}}`,
		`{"run":{"requests":-1}}`,
		`{"runs":{}}`,
		`{"token":{"requests":1}} {}`,
		`{"tenants":{"":{"period":"day"}}}`,
	} {
		if _, err := ParsePolicy([]byte(bad)); err == nil {
			t.Errorf("ParsePolicy(%s): no error", bad)
		}
	}
}

func TestRunKeyEscapes(t *testing.T) {
	if RunKey("a/b", "c", "d") == RunKey("a", "b/c", "d") {
		t.Error("two runs share a key")
	}
	if RunKey("a%2Fb", "c", "d") == RunKey("a/b", "c", "d") {
		t.Error("escaped and unescaped share a key")
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
