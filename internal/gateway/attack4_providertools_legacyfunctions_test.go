package gateway

import "testing"

// FINDING (low, false positive): a function's JSON Schema is skipped
// only where the function is a tool ("parameters" inside "tools"), but
// OpenAI's Chat Completions still takes functions in the older top-level
// "functions" list (openai-go v3 chatcompletion.go,
// ChatCompletionNewParams.Functions `json:"functions"`, "Deprecated in
// favor of `tools`. A list of functions the model may generate JSON
// inputs for."; ChatCompletionNewParamsFunction{Name, Description,
// Parameters}), which many clients (LangChain's older agents, the
// openai-python `functions=` call) still send. There "parameters" is read
// by the body rules, so an ordinary schema property named "network" is
// taken for a hosted network setting and one named "tools" for a list of
// provider tools (type "array" not local), and the request is refused.
// The model only writes JSON for these functions; the caller runs them.
func TestAttack4ProviderToolsLegacyFunctionsSchema(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	msgs := `"messages":[{"role":"user","content":"Attach the VM to the staging network"}]`
	for _, body := range []string{
		`{"model":"gpt-4o",` + msgs + `,"functions":[{"name":"configure_vm","description":"Configure a VM","parameters":{"type":"object","properties":{"network":{"type":"string","description":"VPC name"}},"required":["network"]}}]}`,
		`{"model":"gpt-4o",` + msgs + `,"functions":[{"name":"plan","parameters":{"type":"object","properties":{"tools":{"type":"array","items":{"type":"string"}}}}}]}`,
	} {
		attackExpectForwarded(t, e, tok, "openai", "/v1/chat/completions", body)
	}
}
