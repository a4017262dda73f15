package gateway

import (
	"strings"
	"testing"
)

// attack7Send posts body to path of provider prov with a token allowed
// only gpt-4o-mini and reports whether the upstream received it.
func attack7Send(t *testing.T, e *env, prov, method, path string, hdr map[string]string, body string) (forwarded bool, code int, msg string) {
	t.Helper()
	tok := e.mint(t, Grant{Providers: []string{prov}, Models: []string{"gpt-4o-mini", "gemini-2.5-flash", "claude-sonnet-4-5"}, Tenant: "t", Agent: "a"}).Token
	h := map[string]string{"Authorization": "Bearer " + tok}
	if body != "" {
		h["Content-Type"] = "application/json"
	}
	for k, v := range hdr {
		h[k] = v
	}
	before := len(e.up[prov].requests())
	code, _, msg = e.do(t, method, path, h, body)
	return len(e.up[prov].requests()) > before, code, strings.TrimSpace(msg)
}

// FINDING (high, model allow-list bypass through a LiteLLM upstream, on
// a default path): LiteLLM's proxy passes every body member it does not
// know through the router to litellm.completion as a keyword argument,
// and completion() does
//
//	if deployment_id is not None:  # azure llms
//	    model = deployment_id
//	    custom_llm_provider = "azure"
//
// with the api_key/api_base of the deployment the body's "model" chose.
// A token allowed gpt-4o-mini (an Azure deployment behind LiteLLM) runs
// the resource's gpt-5 deployment by adding "deployment_id":"gpt-5";
// bodyModel reads only "model" and sees gpt-4o-mini. Should: with a
// models list, a body member that names a model or deployment
// (deployment_id, and likewise engine, model_id) makes the model unknown
// (refused), as isFallbackModels does for fallbacks.
func TestAttack7LiteLLMDeploymentIDOverridesModel(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	body := `{"model":"gpt-4o-mini","deployment_id":"gpt-5","messages":[{"role":"user","content":"hi"}]}`
	if fwd, code, msg := attack7Send(t, e, "compat", "POST", "/compat/v1/chat/completions", nil, body); fwd {
		t.Errorf("body with deployment_id gpt-5 forwarded (%d %s): LiteLLM's completion() runs model = deployment_id", code, msg)
	}
}

// FINDING (high, model allow-list bypass through a LiteLLM upstream, on
// a default path): litellm.completion() also takes "model_list" from its
// keyword arguments (which the proxy fills from the body):
//
//	if model_list is not None:
//	    deployments = [m["litellm_params"] for m in model_list if m["model_name"] == model]
//	    return batch_completion_models(deployments=deployments, **args)
//
// batch_completion_models runs each deployment's litellm_params (any
// model the caller writes) with the missing arguments, the deployment's
// api_key and api_base among them, taken from the call. A token allowed
// gpt-4o-mini runs gpt-5 with the deployment's key: "model_list" holds
// "model" but is not "model" nor isFallbackModels (whose "models" is an
// exact name). Should: a member naming a model list (model_list) makes
// the model unknown, like user_config (whose router config is a
// model_list).
func TestAttack7LiteLLMModelListInBody(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],` +
		`"model_list":[{"model_name":"gpt-4o-mini","litellm_params":{"model":"gpt-5"}},{"model_name":"openai/gpt-4o-mini","litellm_params":{"model":"openai/gpt-5"}}]}`
	if fwd, code, msg := attack7Send(t, e, "compat", "POST", "/compat/v1/chat/completions", nil, body); fwd {
		t.Errorf("body with model_list forwarded (%d %s): litellm.completion runs batch_completion_models over the caller's litellm_params", code, msg)
	}
}

// FINDING (medium, model allow-list bypass through a LiteLLM upstream,
// on default paths /v1/completions and /v1/embeddings, for a provider
// with ProviderTools): LiteLLM's _read_request_body parses the body as a
// form when "form" is in the Content-Type (dict(await request.form())),
// as JSON otherwise. Only the provider-tools check (providerreach)
// refuses a Content-Type that is neither JSON nor multipart; a provider
// with ProviderTools skips it, and the model check (bodyModel) reads any
// body as JSON whatever its Content-Type. A body that is JSON naming
// gpt-4o-mini and, as application/x-www-form-urlencoded,
// model=gpt-5&prompt=... is let through; LiteLLM runs gpt-5. (A form's
// values are strings: prompt and input are strings, so /v1/completions
// and /v1/embeddings; newer LiteLLM also JSON-decodes metadata and
// user_config from a form.) Without ProviderTools the same body is
// refused 400 (held, logged below). Should: with a models list, a body
// whose Content-Type is not JSON is refused whatever ProviderTools says
// (the media-type check belongs to the model check too).
func TestAttack7FormContentTypeHidesModel(t *testing.T) {
	body := `{"x=":"&model=gpt-5&prompt=hello&y=","model":"gpt-4o-mini","prompt":"hi"}`
	for _, tools := range []bool{false, true} {
		e := newEnv(t, defaultPaths(nil), func(o *Options) {
			pc := o.Providers["compat"]
			pc.ProviderTools = tools
			o.Providers["compat"] = pc
		})
		for _, ct := range []string{"application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=utf-8", "application/json; x=form"} {
			for _, path := range []string{"/compat/v1/completions", "/compat/v1/embeddings"} {
				fwd, code, msg := attack7Send(t, e, "compat", "POST", path, map[string]string{"Content-Type": ct}, body)
				if fwd && strings.Contains(ct, "urlencoded") {
					t.Errorf("ProviderTools=%v: %s with Content-Type %q forwarded (%d %s): as a form it is model=gpt-5", tools, path, ct, code, msg)
				} else {
					t.Logf("ProviderTools=%v: %s %q: forwarded=%v %d %s", tools, path, ct, fwd, code, msg)
				}
			}
		}
	}
}

// FINDING (low: only on a path the default allow-list refuses, i.e. when
// an operator admits /** or LiteLLM's Azure routes for a compat
// provider): LiteLLM's proxy serves
// /openai/deployments/{model}/chat/completions and
// /engines/{model}/chat/completions with chat_completion(model=...) from
// the path, which wins over the body's model (data["model"] = ... or
// model or data["model"]). The gateway checks only the body's model. A
// token allowed gpt-4o-mini runs gpt-5. Should: with a models list, a
// path segment after "deployments" or "engines" (or any path other than
// the defaults) is checked as the model or refused.
func TestAttack7AzureDeploymentPathModel(t *testing.T) {
	e := newEnv(t) // "/**" admitted, as an operator may for a router
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, p := range []string{
		"/compat/openai/deployments/gpt-5/chat/completions?api-version=2024-10-21",
		"/compat/engines/gpt-5/chat/completions",
		"/openai/openai/deployments/gpt-5/chat/completions",
	} {
		prov := strings.Split(p, "/")[1]
		if fwd, code, msg := attack7Send(t, e, prov, "POST", p, nil, body); fwd {
			t.Errorf("%s forwarded (%d %s): the router runs the path's model gpt-5", p, code, msg)
		}
	}
}

// HELD: with the production allow-list the Azure-style and LiteLLM
// engine routes, batches, files, Anthropic message batches and the
// Realtime API are refused for a model-scoped token.
func TestAttack7DefaultPathsRefuseModelRoutes(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct{ prov, method, path string }{
		{"compat", "POST", "/compat/openai/deployments/gpt-5/chat/completions"},
		{"compat", "POST", "/compat/engines/gpt-5/chat/completions"},
		{"compat", "POST", "/compat/v1/engines/gpt-5/completions"},
		{"compat", "POST", "/compat/api/chat"},
		{"compat", "POST", "/compat/api/generate"},
		{"compat", "POST", "/compat/v1/batches"},
		{"openai", "POST", "/openai/v1/files"},
		{"openai", "POST", "/openai/v1/batches"},
		{"openai", "GET", "/openai/v1/realtime?model=gpt-5"},
		{"openai", "POST", "/openai/v1/realtime/sessions"},
		{"openai", "POST", "/openai/v1/models/gpt-5/chat/completions"},
		{"anthropic", "POST", "/anthropic/v1/messages/batches"},
		{"gemini", "POST", "/gemini/v1beta/models/gemini-2.5-flash:batchGenerateContent"},
		{"gemini", "POST", "/gemini/v1beta/batches"},
		{"gemini", "POST", "/gemini/v1beta/models/gemini-2.5-flash/models/gemini-2.5-pro:generateContent"},
	} {
		if fwd, code, msg := attack7Send(t, e, c.prov, c.method, c.path, nil, body); fwd {
			t.Errorf("%s %s forwarded (%d %s)", c.method, c.path, code, msg)
		}
	}
}

// HELD: body channels that the fixes cover or that carry no model.
func TestAttack7BodyChannelsHeld(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	refused := []string{
		`{"model":"gpt-4o-mini","models":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","Models":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","MODEL":"gpt-5"}`,
		`{"model":"gpt-4o-mini","mod\u0065l":"gpt-5"}`,
		`{"model":"gpt-4o-mini","model\u0000x":"gpt-5"}`,
		`{"model":"gpt-4o-mini","fallbacks":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","user_config":{"model_list":[]}}`,
		`{"model":"gpt-4o-mini","preset":"p"}`,
		`{"model":"gpt-4o-mini","default_fallbacks":["gpt-5"]}`,
		`{"model":"gpt-4o-mini,gpt-5"}`,
		`{"model":["gpt-4o-mini","gpt-5"]}`,
		`{"model":"gpt-4o-mini"}{"model":"gpt-5"}`,
		`[{"model":"gpt-4o-mini"}]`,
		"\ufeff" + `{"model":"gpt-5"}`,
		`{"model":"gpt-5","x":NaN}`,
	}
	for _, b := range refused {
		if fwd, code, msg := attack7Send(t, e, "compat", "POST", "/compat/v1/chat/completions", nil, b); fwd {
			t.Errorf("%s forwarded (%d %s)", b, code, msg)
		}
	}
	// Members that choose a provider or transform but not a model.
	passed := []string{
		`{"model":"gpt-4o-mini","provider":{"order":["azure"],"allow_fallbacks_x":1}}`,
		`{"model":"gpt-4o-mini","route":"fallback"}`,
	}
	for _, b := range passed {
		fwd, code, msg := attack7Send(t, e, "compat", "POST", "/compat/v1/chat/completions", nil, b)
		t.Logf("%s: forwarded=%v %d %s", b, fwd, code, msg)
	}
}

// HELD: query and header channels.
func TestAttack7QueryHeaderChannelsHeld(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, q := range []string{"model=gpt-5", "Model=gpt-5", "mode%6C=gpt-5", "model%00=gpt-5", "model[]=gpt-5", "x=1;model=gpt-5",
		"x=%zz&model=gpt-5", "fallbacks=gpt-5", "models=gpt-5", "preset=p", "user_config=%7B%7D", "mo%64el=gpt-5", "deployment_model=x", "%6dodel=gpt-5"} {
		if fwd, code, msg := attack7Send(t, e, "compat", "POST", "/compat/v1/chat/completions?"+q, nil, body); fwd {
			t.Errorf("?%s forwarded (%d %s)", q, code, msg)
		}
	}
	for _, h := range []string{"X-Portkey-Config", "x-portkey-provider", "X-Model", "x-litellm-model", "X-Fallbacks", "Helicone-Fallbacks", "X-Model-Override", "X_Model", "x-MODEL-id"} {
		if fwd, code, msg := attack7Send(t, e, "compat", "POST", "/compat/v1/chat/completions", map[string]string{h: `{"override_params":{"model":"gpt-5"}}`}, body); fwd {
			t.Errorf("header %s forwarded (%d %s)", h, code, msg)
		}
	}
}

// Records what happens to an underscore spelling of Portkey's header: Go
// does not fold "_" to "-", and Portkey (Node, Headers.get) does not
// either, so it is not a bypass there; logged only.
func TestAttack7PortkeyUnderscoreHeader(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	fwd, code, msg := attack7Send(t, e, "compat", "POST", "/compat/v1/chat/completions", map[string]string{"x_portkey_config": `{"override_params":{"model":"gpt-5"}}`}, body)
	t.Logf("x_portkey_config: forwarded=%v %d %s", fwd, code, msg)
}

// HELD: where an operator admits every path, the endpoints whose model
// sits below the top level (OpenAI batches and their JSON Lines input
// files, Anthropic message batches' requests[].params.model, the
// Realtime API's ?model= and websocket) are refused for a model-scoped
// token: their body has no top-level model, or the query names one.
func TestAttack7NestedModelEndpointsHeld(t *testing.T) {
	e := newEnv(t)
	jsonl := `{"custom_id":"1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-5","messages":[]}}`
	for _, c := range []struct {
		prov, method, path, ct, body string
	}{
		{"openai", "POST", "/openai/v1/batches", "application/json", `{"input_file_id":"file-1","endpoint":"/v1/chat/completions","completion_window":"24h"}`},
		{"openai", "POST", "/openai/v1/files", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" + jsonl + "\r\n--b--\r\n"},
		{"anthropic", "POST", "/anthropic/v1/messages/batches", "application/json", `{"requests":[{"custom_id":"1","params":{"model":"claude-opus-4-1","max_tokens":1,"messages":[]}}]}`},
		{"openai", "GET", "/openai/v1/realtime?model=gpt-5", "", ""},
		{"gemini", "POST", "/gemini/v1beta/models/gemini-2.5-flash:batchGenerateContent", "application/json", `{"batch":{"input_config":{"requests":{"requests":[{"request":{"model":"models/gemini-2.5-pro"}}]}}}}`},
	} {
		h := map[string]string{}
		if c.ct != "" {
			h["Content-Type"] = c.ct
		}
		if c.prov == "openai" && c.method == "GET" {
			h["Upgrade"] = "websocket"
			h["Connection"] = "Upgrade"
		}
		if fwd, code, msg := attack7Send(t, e, c.prov, c.method, c.path, h, c.body); fwd {
			t.Errorf("%s %s with %q forwarded (%d %s)", c.method, c.path, c.body, code, msg)
		}
	}
}

// FINDING (low: only where an operator admits batch endpoints, which the
// default allow-list refuses): for a batch the model that runs is per
// request, below the top level (Anthropic's requests[].params.model, the
// body.model of each line of an OpenAI batch input file), but the check
// reads only a top-level "model". A batch body carrying an allowed
// top-level "model" as a decoy passes with any nested model: Anthropic
// message batches, and a router's /v1/batches (LiteLLM takes a "model"
// in the batch body to choose the deployment, the file's lines choose
// the model run). Whether the upstream tolerates the extra member
// decides the impact. Should: with a models list, the batch endpoints
// (and any path outside the defaults whose model is not the body's
// top-level one) are refused, or every nested model is checked.
func TestAttack7BatchDecoyModel(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ prov, path, body string }{
		{"anthropic", "/anthropic/v1/messages/batches", `{"model":"claude-sonnet-4-5","requests":[{"custom_id":"1","params":{"model":"claude-opus-4-1","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}}]}`},
		{"compat", "/compat/v1/batches", `{"model":"gpt-4o-mini","input_file_id":"file-abc","endpoint":"/v1/chat/completions","completion_window":"24h"}`},
	} {
		if fwd, code, msg := attack7Send(t, e, c.prov, "POST", c.path, nil, c.body); fwd {
			t.Errorf("%s with a decoy top-level model forwarded (%d %s): the nested models run", c.path, code, msg)
		}
	}
}
