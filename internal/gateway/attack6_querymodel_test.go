package gateway

import (
	"strings"
	"testing"
)

// FINDING (high, model allow-list bypass through a LiteLLM upstream):
// the model check reads only the body's "model", but the query string
// of an admitted path is forwarded as is. LiteLLM's proxy declares
// chat_completion(request, model: Optional[str] = None, ...) on
// /v1/chat/completions, so FastAPI takes ?model= from the query, and
// base_process_llm_request sets data["model"] = completion_model or
// user_model or model ("for azure deployments") or body model: the query
// wins. A token allowed gpt-4o-mini runs gpt-5 by POSTing
// /v1/chat/completions?model=gpt-5 with "model":"gpt-4o-mini" in the
// body (the meter also attributes it to gpt-4o-mini). Should: a model
// request whose query names a model (a "model" parameter) is refused when the token has a models list, or the parameter
// is dropped before forwarding.
func TestAttack6QueryModelOverridesBodyModel(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"compat"}, Models: []string{"gpt-4o-mini"}, Tenant: "t", Agent: "a"}).Token
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, q := range []string{"model=gpt-5", "stream=false&model=gpt-5"} {
		code, _, msg := e.do(t, "POST", "/compat/v1/chat/completions?"+q, map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}, body)
		if code == 200 {
			last := e.up["compat"].last(t)
			if strings.Contains(strings.ToLower(last.RawQuery), "model=") {
				t.Errorf("?%s: forwarded with query %q and body model gpt-4o-mini; LiteLLM runs the query's model (gpt-5)", q, last.RawQuery)
			}
		} else {
			t.Logf("?%s: refused %d %s", q, code, strings.TrimSpace(msg))
		}
	}
}

// FINDING (medium, model allow-list bypass through a Portkey upstream):
// a router's model can also come from a request header. Portkey's
// gateway (self-hosted or hosted) takes its routing config from the
// x-portkey-config header (a JSON config or a config id), whose
// override_params.model replaces the body's model, and whose
// strategy/targets give fallbacks to other models; the header reaches
// the upstream untouched. A token allowed gpt-4o-mini runs gpt-5 with
// the injected key. Should: with a models list, a request carrying a
// router's routing header (x-portkey-config, and likewise any header
// the deployment's router reads) is refused or the header dropped.
func TestAttack6RouterHeaderOverridesModel(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"compat"}, Models: []string{"gpt-4o-mini"}, Tenant: "t", Agent: "a"}).Token
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	cfg := `{"override_params":{"model":"gpt-5"}}`
	code, _, _ := e.do(t, "POST", "/compat/v1/chat/completions", map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json", "X-Portkey-Config": cfg, "X-Portkey-Provider": "openai"}, body)
	if code == 200 {
		if h := e.up["compat"].last(t).Header.Get("X-Portkey-Config"); h != "" {
			t.Errorf("x-portkey-config %s forwarded with a model-scoped token: Portkey runs gpt-5", h)
		}
	}
}
