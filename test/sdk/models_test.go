package sdk

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"google.golang.org/genai"
)

// mintModels asks the admin listener for a gateway token for providers
// that may run only models.
func mintModels(t testing.TB, providers, models []string) minted {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"providers": providers, "models": models, "ttl_seconds": 600})
	var m minted
	admin(t, "/v1/gateway/tokens", body, http.StatusCreated, &m)
	return m
}

// TestModelScopedTokens: with a token limited to some models, each
// official SDK's ordinary request (its own headers, query and body) for
// an allowed model goes through, and one for another model is refused
// with a typed 403 and not retried. (The gateway also refuses a model
// named outside the body: nothing an SDK sends by itself may look like
// one.)
func TestModelScopedTokens(t *testing.T) {
	tok := mintModels(t, []string{"anthropic", "openai", "gemini"}, []string{"claude-standin", "gpt-standin", "gemini-standin"}).Token
	ctx := context.Background()

	ac, an := anthropicClient("anthropic", tok)
	if _, err := ac.Messages.New(ctx, messageParams("claude-standin")); err != nil {
		t.Errorf("anthropic, allowed model: %v", err)
	}
	before := an.n.Load()
	_, err := ac.Messages.New(ctx, messageParams("claude-other"))
	checkRefusal(t, "anthropic, other model", err, "token not valid for model claude-other")
	if got := an.n.Load() - before; got != 1 {
		t.Errorf("anthropic, other model: %d attempts, want 1", got)
	}

	oc, on := openaiClient("openai", tok)
	if _, err := oc.Chat.Completions.New(ctx, chatParams("gpt-standin")); err != nil {
		t.Errorf("openai, allowed model: %v", err)
	}
	before = on.n.Load()
	_, err = oc.Chat.Completions.New(ctx, chatParams("gpt-other"))
	checkRefusal(t, "openai, other model", err, "token not valid for model gpt-other")
	if got := on.n.Load() - before; got != 1 {
		t.Errorf("openai, other model: %d attempts, want 1", got)
	}

	gc, gn := geminiClient(t, "gemini", tok)
	if _, err := gc.Models.GenerateContent(ctx, "gemini-standin", genai.Text("hi"), nil); err != nil {
		t.Errorf("gemini, allowed model: %v", err)
	}
	before = gn.n.Load()
	_, err = gc.Models.GenerateContent(ctx, "gemini-other", genai.Text("hi"), nil)
	checkRefusal(t, "gemini, other model", err, "token not valid for model gemini-other")
	if got := gn.n.Load() - before; got != 1 {
		t.Errorf("gemini, other model: %d attempts, want 1", got)
	}
}
