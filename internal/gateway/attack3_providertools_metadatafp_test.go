package gateway

import "testing"

// FINDING (low, false positive): the URL and model rules apply to a
// member of that name at any depth, including the caller's own key/value
// maps that the provider stores and never acts on: "metadata" (OpenAI's
// Chat Completions and Responses, "Set of 16 key-value pairs that can be
// attached to an object ... Values are strings", openai-go v3
// shared.Metadata map[string]string; Batches and Files take it too) and
// a Responses prompt's string variables (prompt.variables, substituted
// into the prompt as text; only an input_image / input_file variable is
// fetched). A request tagging its origin — metadata {"url":
// "https://github.com/acme/widget/pull/42"}, {"model":"research-bot"},
// or a prompt template with a {{url}} variable — is refused 403 as if
// the provider would fetch that URL or search the web, though it does
// neither. A string member of a caller's metadata map (and a prompt
// variable given as a plain string) names nothing the provider reaches.
func TestAttackProviderToolsFalsePositiveMetadataURL(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/responses"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4.1","store":true,"metadata":{"url":"https://github.com/acme/widget/pull/42","team":"infra"},"messages":[{"role":"user","content":"Summarize the review comments below."}]}`},
		{"/v1/responses", `{"model":"gpt-5","store":true,"metadata":{"model":"research-bot","uri":"https://tickets.acme.example/T-12"},"input":"hello"}`},
		{"/v1/responses", `{"model":"gpt-5","prompt":{"id":"pmpt_linkcheck","variables":{"url":"https://acme.example/blog/launch","tone":"brief"}}}`},
	} {
		attackExpectForwarded(t, e, tok, "openai", c.path, c.body)
	}
}
