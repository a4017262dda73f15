package gateway

import "testing"

// FINDING (medium, false positive that breaks real use): schemas are
// skipped only inside a tool, but a request carries the caller's JSON
// Schema outside tools too: the structured output format (Chat
// Completions response_format.json_schema.schema, Responses
// text.format.schema, Anthropic output_config.format.schema, Gemini
// generationConfig.responseSchema / responseJsonSchema). A property
// named "tools" there is a member "tools" holding an object, which the
// checker reads as one tool: its "type" is "array" (or Gemini's "ARRAY"),
// not a local tool type, so the request is refused with 403 "... /tools
// type array". Schemas with such a property are ordinary (a list of the
// tools an answer names, an agent's plan of tool calls; openai-go
// ResponseFormatJSONSchemaJSONSchemaParam.Schema "The schema for the
// response format, described as a JSON Schema object"), and the provider
// runs nothing they describe. Schemas should be skipped wherever they
// are, as inside tools.
func TestAttackProviderToolsFalsePositiveOutputSchema(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai", "anthropic", "gemini"}}).Token
	schema := `{"type":"object","properties":{"answer":{"type":"string"},"tools":{"type":"array","items":{"type":"string"}}},"required":["answer","tools"],"additionalProperties":false}`
	attackExpectForwarded(t, e, tok, "openai", "/v1/chat/completions",
		`{"model":"gpt-4.1","messages":[{"role":"user","content":"Which tools does this README mention?"}],"response_format":{"type":"json_schema","json_schema":{"name":"tools_mentioned","strict":true,"schema":`+schema+`}}}`)
	attackExpectForwarded(t, e, tok, "openai", "/v1/responses",
		`{"model":"gpt-5.5","input":"Plan the steps","text":{"format":{"type":"json_schema","name":"plan","strict":true,"schema":`+schema+`}}}`)
	attackExpectForwarded(t, e, tok, "anthropic", "/v1/messages",
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Which tools does this README mention?"}],"output_config":{"format":{"type":"json_schema","schema":`+schema+`}}}`)
	attackExpectForwarded(t, e, tok, "gemini", "/v1beta/models/gemini-2.5-flash:generateContent",
		`{"contents":[{"parts":[{"text":"Which tools does this README mention?"}]}],"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"answer":{"type":"STRING"},"tools":{"type":"ARRAY","items":{"type":"STRING"}}}}}}`)
}
