package gateway

import (
	"strings"
	"testing"
)

// TestAttackModelFallbackFields: a token's models allow-list is checked
// against the body's "model" only. OpenAI-compatible routers (the
// "compat" kind: OpenRouter's "models" fallback list, LiteLLM's
// "fallbacks") run the request on another model named in the same body
// when the first one fails, and the caller can make it fail (a prompt over
// the allowed model's context window). A token allowed only a cheap model
// then gets an expensive one. A body naming models outside the
// allow-list in such a field must be refused (or the field dropped).
func TestAttackModelFallbackFields(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"compat"}, Models: []string{"cheap-model"}}).Token
	for _, body := range []string{
		`{"model":"cheap-model","models":["openai/o1-pro"],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"cheap-model","fallbacks":["o1-pro"],"messages":[{"role":"user","content":"hi"}]}`,
	} {
		code, _, _ := e.do(t, "POST", "/compat/v1/chat/completions", bearer(tok), body)
		if code != 200 {
			continue // refused: fine
		}
		if got := string(e.up["compat"].last(t).Body); strings.Contains(got, "o1-pro") {
			t.Errorf("a token allowed only cheap-model forwarded %s: the router may run it on o1-pro", got)
		}
	}
}
