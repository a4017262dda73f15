package gateway

import (
	"bytes"
	"testing"

	"github.com/agentcustody/custody/internal/providerreach"
)

// FINDING (low, inconsistency): isFallbackModels lowers with
// unicode.ToLower, which leaves the long s (U+017F) and the Kelvin sign
// alone, while encoding/json (a router written in Go, e.g. Bifrost with
// its "fallbacks") matches a member name to a field with simple case
// folding: "modelſ" is "models", "uſer_config" is "user_config".
// providerreach's normName already reads ſ as s, and bodyModel itself
// compares "model" with strings.EqualFold (which folds ſ and K). Should:
// fold names the same way (normName) before the fallback test.
func TestAttack6FallbackNameFolding(t *testing.T) {
	for _, b := range []string{
		`{"model":"gpt-4o-mini","modelſ":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","model\u017f":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","uſer_config":{"model_list":[]}}`,
	} {
		if m := bodyModel([]byte(b)); m != "" {
			t.Errorf("bodyModel(%s) = %q; encoding/json reads the second name as a fallback list", b, m)
		}
	}
}

// HELD: NUL-cut names and spelled variants of the fallback members make
// the model unknown.
func TestAttack6FallbackVariantsHeld(t *testing.T) {
	for _, b := range []string{
		`{"model":"gpt-4o-mini","models\u0000":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","MODELS":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","Fall-Backs":["gpt-5"]}`,
		`{"model":"gpt-4o-mini","user\u002dconfig":{}}`,
		`{"model":"gpt-4o-mini","userConfig":{}}`,
		`{"model":"gpt-4o-mini","context_window_fallback_dict":{}}`,
		`{"model\u0000":"gpt-5","model":"gpt-4o-mini"}`,
		`{"model":"gpt-4o-mini","model\u0000x":"gpt-5"}`,
		`{"model":"gpt-4o-mini","Model":"gpt-5"}`,
		`{"model":"gpt-4o-mini","mode\u006c":"gpt-5"}`,
	} {
		if m := bodyModel([]byte(b)); m != "" {
			t.Errorf("bodyModel(%s) = %q, want \"\"", b, m)
		}
	}
}

// HELD: ordinary OpenAI, Anthropic and Responses bodies keep their
// model (no false positive from isFallbackModels).
func TestAttack6NoFalsePositiveHeld(t *testing.T) {
	for _, b := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"models fallback user_config"}],"modalities":["text","audio"],"metadata":{"models":"x","fallbacks":[]},"tools":[],"tool_choice":"auto","parallel_tool_calls":true,"response_format":{"type":"json_schema"},"prediction":{"type":"content","content":"x"},"store":false,"user":"u","safety_identifier":"s","prompt_cache_key":"k","service_tier":"auto","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":5,"n":1,"seed":1,"logit_bias":{},"top_logprobs":2,"reasoning_effort":"low","verbosity":"low","web_search_options":{}}`,
		`{"model":"gpt-4o-mini","system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}],"max_tokens":10,"messages":[],"thinking":{"type":"enabled","budget_tokens":1024},"metadata":{"user_id":"x"},"stop_sequences":[],"top_k":1,"container":null,"service_tier":"auto","context_management":{}}`,
		`{"model":"gpt-4o-mini","input":"x","instructions":"models","previous_response_id":null,"reasoning":{"effort":"low"},"text":{"format":{"type":"text"}},"include":[],"truncation":"auto","background":false,"max_output_tools_calls":1,"max_output_tokens":100}`,
	} {
		if m := bodyModel([]byte(b)); m != "gpt-4o-mini" {
			t.Errorf("bodyModel(%.60s…) = %q, want gpt-4o-mini", b, m)
		}
	}
}

// HELD: bodyModel and providerreach parse the held bytes in place and
// leave them as they were (the bytes checked are the bytes forwarded).
func TestAttack6ChecksDoNotMutateHeld(t *testing.T) {
	b := []byte(`{"model":"gpt\u002d4o","tools":[{"type":"function","function":{"name":"\u0066","parameters":{"a":"\ud83d\ude00\\\/\n"}}}],"messages":[{"role":"user","content":"\u00e9\"x"}],"metadata":{"models\u0000":1}}`)
	orig := bytes.Clone(b)
	bodyModel(b)
	providerreach.Check(b, providerreach.Request{ContentType: "application/json", Path: "/v1/chat/completions"})
	if !bytes.Equal(b, orig) {
		t.Errorf("held body changed by the checks:\n%s\n%s", orig, b)
	}
}

// FINDING (medium, model allow-list bypass on OpenRouter when the
// provider's tools are allowed): OpenRouter's "preset" member names a
// stored configuration whose "model selection (specific model or array
// of models with fallbacks)" applies to the request
// (openrouter.ai/docs/guides/features/presets). providerreach refuses
// "preset" as a provider-run tool, but only when the provider's tools
// are not allowed (checkTools); bodyModel, the model allow-list's only
// reader, takes {"model":"gpt-4o-mini","preset":"p"} as gpt-4o-mini.
// Should: isFallbackModels (or bodyModel) treats a top-level "preset"
// as another model, as it does "models".
func TestAttack6PresetRunsAnotherModel(t *testing.T) {
	for _, b := range []string{
		`{"model":"gpt-4o-mini","preset":"free-then-cheap","messages":[]}`,
	} {
		if m := bodyModel([]byte(b)); m != "" {
			t.Errorf("bodyModel(%s) = %q; the preset's models list runs instead", b, m)
		}
	}
}

// The same end to end: a provider whose tools are allowed forwards the
// preset with a model-scoped token.
func TestAttack6PresetRunsAnotherModelEndToEnd(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		c := o.Providers["compat"]
		c.ProviderTools = true
		o.Providers["compat"] = c
	})
	tok := e.mint(t, Grant{Providers: []string{"compat"}, Models: []string{"gpt-4o-mini"}, Tenant: "t", Agent: "a"}).Token
	code, _, _ := e.do(t, "POST", "/compat/v1/chat/completions", map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}, `{"model":"gpt-4o-mini","preset":"free-then-cheap","messages":[]}`)
	if code == 200 {
		t.Errorf("preset forwarded with a token allowed only gpt-4o-mini")
	}
}
