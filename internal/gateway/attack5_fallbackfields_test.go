package gateway

import (
	"strings"
	"testing"
)

// FINDING (medium): bodyModel refuses a body with LiteLLM's "fallbacks"
// (fallbackModelFields) but LiteLLM's Router reads two more per-request
// fallback lists from the same request kwargs (router.py:
// `context_window_fallbacks = kwargs.get("context_window_fallbacks",
// self.context_window_fallbacks)`, same for "content_policy_fallbacks"),
// and the proxy passes the JSON body as those kwargs. A token allowed
// only cheap-model sends a prompt past cheap-model's context window with
// "context_window_fallbacks":[{"cheap-model":["o1-pro"]}]: the gateway
// forwards it (model "cheap-model" is allowed) and LiteLLM runs o1-pro.
// The proxy also builds a whole per-request Router from "user_config"
// (model_list mapping the name "cheap-model" to any deployment),
// route_request's `elif "user_config" in data` branch.
// Should: these members make the model ambiguous (bodyModel ""), like
// "fallbacks", and a model-scoped token is refused.
func TestAttack5LiteLLMOtherFallbackFields(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"compat"}, Models: []string{"cheap-model"}}).Token
	for _, body := range []string{
		`{"model":"cheap-model","context_window_fallbacks":[{"cheap-model":["o1-pro"]}],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"cheap-model","content_policy_fallbacks":[{"cheap-model":["o1-pro"]}],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"cheap-model","user_config":{"model_list":[{"model_name":"cheap-model","litellm_params":{"model":"openai/o1-pro"}}]},"messages":[{"role":"user","content":"hi"}]}`,
	} {
		code, _, _ := e.do(t, "POST", "/compat/v1/chat/completions", bearer(tok), body)
		if code != 200 {
			continue // refused: fine
		}
		if got := string(e.up["compat"].last(t).Body); strings.Contains(got, "o1-pro") {
			t.Errorf("a token allowed only cheap-model forwarded %s: LiteLLM may run it on o1-pro", got)
		}
	}
}
