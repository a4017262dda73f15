package gateway

import (
	"strings"
	"testing"
)

// FINDING (low, false positive on a default path): the google-genai SDK
// (Python and JS) sends every Gemini Developer API embed_content call to
// POST /v1beta/models/{model}:batchEmbedContents, which
// DefaultAllowPaths(KindGemini) admits. modelElsewhere refuses any path
// segment holding "batch" for a model-scoped token, so a token whose
// models list holds the embedding model is refused "403 token not valid
// for model ... named by path segment" for an ordinary embedding.
// Google requires each requests[].model to equal the path's model
// ("must match the model specified BatchEmbedContentsRequest.model"), so
// the path model is the only one that runs. Should: batchEmbedContents
// (a default path, synchronous, one model) is judged by its path model
// like embedContent; only batchGenerateContent/asyncBatchEmbedContent
// and /batches need the refusal.
func TestAttack8GeminiBatchEmbedContentsFalsePositive(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	body := `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"hi"}]}}]}`
	for _, p := range []string{
		"/gemini/v1beta/models/gemini-embedding-001:batchEmbedContents",
		"/gemini/v1/models/gemini-embedding-001:batchEmbedContents",
	} {
		tok := attack8Token(t, e, "gemini")
		before := len(e.up["gemini"].requests())
		code, _, msg := e.do(t, "POST", p, map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json", "X-Goog-Api-Client": "google-genai-sdk/1.30.0 gl-python/3.12.1"}, body)
		if len(e.up["gemini"].requests()) == before {
			t.Errorf("SDK embed_content %s refused %d %s (model allowed, default path)", p, code, strings.TrimSpace(msg))
		}
	}
	// The same token and model through embedContent passes.
	tok := attack8Token(t, e, "gemini")
	if code, _, msg := e.do(t, "POST", "/gemini/v1beta/models/gemini-embedding-001:embedContent", map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}, `{"content":{"parts":[{"text":"hi"}]}}`); code != 200 {
		t.Fatalf("embedContent refused %d %s", code, msg)
	}
}

// FINDING (low, false positive where an operator admits batch
// endpoints): the "batch" segment rule is applied whether or not the
// request runs a model, so with a models list the SDKs' read-only and
// cancel calls on batches are refused: Anthropic
// messages.batches.list/retrieve/results (GET) and .cancel (bodyless
// POST .../cancel), OpenAI batches.list/retrieve (GET) and
// batches.cancel. The commit exempts exactly these (GET without a body,
// bodyless .../cancel) from needing a model, but the batch rule in
// modelElsewhere ignores runs. None of them can start a model. Should:
// apply the batch-segment refusal only when runs is true (creating a
// batch), like the deployments/engines/models rule.
func TestAttack8BatchReadsRefused(t *testing.T) {
	e := newEnv(t) // batches admitted ("/**"), as an operator may
	for _, c := range []struct{ prov, method, path string }{
		{"anthropic", "GET", "/anthropic/v1/messages/batches?limit=20"},
		{"anthropic", "GET", "/anthropic/v1/messages/batches/msgbatch_1"},
		{"anthropic", "GET", "/anthropic/v1/messages/batches/msgbatch_1/results"},
		{"anthropic", "POST", "/anthropic/v1/messages/batches/msgbatch_1/cancel"},
		{"openai", "GET", "/openai/v1/batches?limit=20"},
		{"openai", "GET", "/openai/v1/batches/batch_1"},
		{"openai", "POST", "/openai/v1/batches/batch_1/cancel"},
	} {
		tok := attack8Token(t, e, c.prov)
		before := len(e.up[c.prov].requests())
		code, _, msg := e.do(t, c.method, c.path, map[string]string{"Authorization": "Bearer " + tok}, "")
		if len(e.up[c.prov].requests()) == before {
			t.Errorf("%s %s refused %d %s (runs no model)", c.method, c.path, code, strings.TrimSpace(msg))
		}
	}
}

// HELD: deployments/engines followed by an empty segment
// (/openai/deployments//gpt-5/..., or deployments/%2Fgpt-5 which Go
// decodes to the same), which modelElsewhere's path rule would skip
// (it needs a non-empty next segment) and a slash-merging front of
// LiteLLM would route to the path model gpt-5, is refused by the path
// allow-list before: even "/**" admits no empty segment.
func TestAttack8DeploymentsEmptySegment(t *testing.T) {
	e := newEnv(t)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, p := range []string{
		"/compat/openai/deployments//gpt-5/chat/completions",
		"/compat/engines//gpt-5/chat/completions",
		"/compat/openai/deployments/%2Fgpt-5/chat/completions",
	} {
		tok := attack8Token(t, e, "compat")
		before := len(e.up["compat"].requests())
		code, _, msg := e.do(t, "POST", p, map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}, body)
		if reqs := e.up["compat"].requests(); len(reqs) > before {
			t.Errorf("%s forwarded as %q (%d %s): deployments followed by an empty segment escapes the path rule", p, reqs[len(reqs)-1].Path, code, strings.TrimSpace(msg))
		}
	}
}

// HELD: the GET/HEAD exemption cannot run a Gemini path model: GET or
// HEAD on models/{m}:generateContent is refused by the path check even
// when "/**" is admitted; a GET on a router's Azure route reaches only a
// POST-only route (no model runs).
func TestAttack8GeminiGetGenerateRefused(t *testing.T) {
	e := newEnv(t)
	for _, m := range []string{"GET", "HEAD"} {
		for _, p := range []string{"/gemini/v1beta/models/gemini-2.5-pro:generateContent", "/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"} {
			tok := attack8Token(t, e, "gemini")
			before := len(e.up["gemini"].requests())
			e.do(t, m, p, map[string]string{"Authorization": "Bearer " + tok}, "")
			if len(e.up["gemini"].requests()) > before {
				t.Errorf("%s %s forwarded with no model check", m, p)
			}
		}
	}
}

// FINDING (low, false positive on a default path, not in the model
// check: the path allow-list): client.models.retrieve("ft:gpt-4o-mini:
// org::abc") (OpenAI SDKs) is GET /v1/models/ft:..., which "GET
// /v1/models/*" should admit, but a wildcard segment (segmentName) does
// not match ':' and every fine-tuned model id has one: "403 path not
// allowed: models", for any token. Should: admit ':' in the wildcard of
// GET /v1/models/* (the model id is only retrieved).
func TestAttack8FineTunedModelRetrieve(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := attack8Token(t, e, "openai")
	if code, _, msg := e.do(t, "GET", "/openai/v1/models/ft:gpt-4o-mini:org::abc", map[string]string{"Authorization": "Bearer " + tok}, ""); code != 200 {
		t.Errorf("models.retrieve(fine-tuned id) refused %d %s", code, strings.TrimSpace(msg))
	}
}
