package gateway

import "testing"

// FINDING (medium, false positive that breaks real use): URL members are
// refused "at any depth outside tools", which includes the arguments of
// the caller's own tool calls and the results it sends back. A provider
// never fetches those: Anthropic's tool_use.input and Gemini's
// functionCall.args are the model's arguments to a tool the caller runs,
// functionResponse.response is the caller's result (docs.anthropic.com
// "Tool use": tool_use blocks are replayed in messages; ai.google.dev
// "Function calling": functionCall / functionResponse parts are sent back
// in contents). Agents replay them on every turn, and a url argument is
// the norm for fetch and browser tools (Claude Code's client-side
// WebFetch takes {"url","prompt"}; Playwright MCP's browser_navigate and
// mcp-server-fetch take {"url"}). After its first fetch, every later turn
// of such an agent is refused with 403, though the fetch was the
// sandbox's own, through its egress policy.
func TestAttackProviderToolsFalsePositiveToolArgs(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "gemini"}}).Token
	attackExpectForwarded(t, e, tok, "anthropic", "/v1/messages",
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"tools":[{"name":"WebFetch","description":"fetch a URL","input_schema":{"type":"object","properties":{"url":{"type":"string"},"prompt":{"type":"string"}},"required":["url","prompt"]}}],"messages":[{"role":"user","content":"Summarize the Go 1.25 release notes"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"WebFetch","input":{"url":"https://go.dev/doc/go1.25","prompt":"summarize"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"Go 1.25 adds ..."}]}]}`)
	attackExpectForwarded(t, e, tok, "gemini", "/v1beta/models/gemini-2.5-flash:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"open the docs"}]},{"role":"model","parts":[{"functionCall":{"name":"browser_navigate","args":{"url":"https://go.dev/doc/"}}}]},{"role":"user","parts":[{"functionResponse":{"name":"browser_navigate","response":{"url":"https://go.dev/doc/","title":"Documentation"}}}]}],"tools":[{"functionDeclarations":[{"name":"browser_navigate","parameters":{"type":"object","properties":{"url":{"type":"string"}}}}]}]}`)
}

// FINDING (low, false positive): OpenAI's generally available computer
// tool is {"type":"computer"} (openai-python types/responses/
// computer_tool_param.py: type: Required[Literal["computer"]], "A tool
// that controls a virtual computer"), run by the caller like
// computer_use_preview: the model returns computer_call actions and the
// client performs them. The allow list has "computer_use_preview",
// "computer_use" and the prefix "computer_" (which needs the underscore),
// so the GA tool of the SDKs is refused with 403 as a provider-run tool.
func TestAttackProviderToolsFalsePositiveComputerTool(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	attackExpectForwarded(t, e, tok, "openai", "/v1/responses",
		`{"model":"gpt-5.5","input":"open the settings page","tools":[{"type":"computer"}]}`)
}

// FINDING (low, false positive): two Responses API tool types that reach
// nothing are refused as provider-run network tools: "tool_search"
// ("Hosted or BYOT tool search configuration for deferred tools",
// openai-python types/responses/tool_search_tool_param.py: it searches
// the request's own tools marked defer_loading) and "namespace" ("Groups
// function/custom tools under a shared namespace", namespace_tool_param.py:
// its tools are only function and custom tools). Agents that load their
// many function tools through tool search (gpt-5.4 and later) get 403.
func TestAttackProviderToolsFalsePositiveToolSearchNamespace(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	attackExpectForwarded(t, e, tok, "openai", "/v1/responses",
		`{"model":"gpt-5.5","input":"list my open orders","tools":[{"type":"tool_search"},{"type":"namespace","name":"crm","description":"CRM tools","tools":[{"type":"function","name":"list_open_orders","description":"List open orders","defer_loading":true,"parameters":{"type":"object","properties":{"customer":{"type":"string"}}}}]}]}`)
}
