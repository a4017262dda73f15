package gateway

import (
	"testing"
)

// HELD: the official SDKs' ordinary generation requests, with the headers
// and query parameters they send, go through for a model-scoped token
// (no header name of theirs holds "model" or "fallback"; Gemini's
// ?alt=sse passes).
func TestAttack7SDKRequestsPass(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	stainless := map[string]string{
		"X-Stainless-Lang": "python", "X-Stainless-Package-Version": "1.99.0", "X-Stainless-OS": "Linux",
		"X-Stainless-Arch": "x64", "X-Stainless-Runtime": "CPython", "X-Stainless-Runtime-Version": "3.12.1",
		"X-Stainless-Retry-Count": "0", "X-Stainless-Read-Timeout": "600", "X-Stainless-Async": "false",
		"X-Stainless-Helper-Method": "stream", "User-Agent": "OpenAI/Python 1.99.0",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range stainless {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		prov, path string
		hdr        map[string]string
		body       string
	}{
		{"openai", "/openai/v1/chat/completions", with(map[string]string{"OpenAI-Organization": "org-1", "OpenAI-Project": "proj_1", "Idempotency-Key": "stainless-python-retry-1"}), `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"openai", "/openai/v1/responses", with(map[string]string{"OpenAI-Beta": "responses=v1"}), `{"model":"gpt-4o-mini","input":"hi","previous_response_id":"resp_1","store":true}`},
		{"openai", "/openai/v1/embeddings", with(nil), `{"model":"gpt-4o-mini","input":"hi","encoding_format":"base64"}`},
		{"compat", "/compat/chat/completions?api-version=2024-10-21", with(nil), `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic", "/anthropic/v1/messages", with(map[string]string{"Anthropic-Version": "2023-06-01", "Anthropic-Beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14", "X-Stainless-Timeout": "600", "Anthropic-Dangerous-Direct-Browser-Access": "true", "X-App": "cli"}), `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic", "/anthropic/v1/messages/count_tokens", with(map[string]string{"Anthropic-Version": "2023-06-01"}), `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`},
		{"gemini", "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", map[string]string{"X-Goog-Api-Client": "google-genai-sdk/1.30.0 gl-python/3.12.1", "User-Agent": "google-genai-sdk/1.30.0 gl-python/3.12.1"}, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"gemini", "/gemini/v1beta/models/gemini-2.5-flash:generateContent", map[string]string{"X-Goog-Api-Client": "genai-js/0.24.1"}, `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":10}}`},
	}
	for _, c := range cases {
		fwd, code, msg := attack7Send(t, e, c.prov, "POST", c.path, c.hdr, c.body)
		if !fwd {
			t.Errorf("%s refused %d %s", c.path, code, msg)
		}
	}
}

// FINDING (low, false positive, not new in 079edb9): with a models
// list every request must name an allowed model, so the SDKs' body-less
// calls on default paths are refused "403 token not valid for model
// (none)": client.models.list() and models.retrieve() (OpenAI,
// Anthropic; Gemini's list too, while its retrieve passes),
// responses.retrieve(id) that polls a background response, its
// stream=true resumption (starting_after) and responses.cancel(id),
// which DefaultAllowPaths admits precisely because the SDKs use them.
// None of them runs a model. Should: a request that runs no model (GET
// on /models, /responses/{id}, /responses/{id}/input_items, POST
// /responses/{id}/cancel) passes a model-scoped token, as Gemini's GET
// /models/{m} already does.
func TestAttack7SDKBodylessCalls(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	for _, c := range []struct{ prov, method, path string }{
		{"openai", "GET", "/openai/v1/models"},
		{"openai", "GET", "/openai/v1/models/gpt-4o-mini"},
		{"openai", "GET", "/openai/v1/responses/resp_1"},
		{"openai", "GET", "/openai/v1/responses/resp_1?stream=true&starting_after=4"},
		{"openai", "GET", "/openai/v1/responses/resp_1/input_items"},
		{"openai", "POST", "/openai/v1/responses/resp_1/cancel"},
		{"anthropic", "GET", "/anthropic/v1/models?limit=20"},
		{"gemini", "GET", "/gemini/v1beta/models?pageSize=50"},
		{"gemini", "GET", "/gemini/v1beta/models/gemini-2.5-flash"},
	} {
		if fwd, code, msg := attack7Send(t, e, c.prov, c.method, c.path, nil, ""); !fwd {
			t.Errorf("%s %s refused %d %s", c.method, c.path, code, msg)
		}
	}
}
