package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

// budget shows a token's budget holding: minted on the admin plane with
// a budget of 100 output tokens, its first call (max_tokens 60) reaches
// the provider stand-in, which reports 57 used; the second (60 more do not
// fit in the 43 left) is refused before it leaves custody, and the usage
// the gateway metered is on the admin plane.
func (g *gatewayScenario) budget(ctx context.Context) {
	admin := func(method, path string, body any) (fixture.Response, error) {
		return fixture.Do(ctx, method, g.custody.AdminURL+path, g.custody.AdminToken, body)
	}
	r, err := admin(http.MethodPost, "/v1/gateway/tokens", map[string]any{
		"providers": []string{"anthropic"}, "ttl_seconds": 600, "tenant": fixture.Namespace, "agent": "budget-demo",
		"budget": map[string]int{"output_tokens": 100},
	})
	var minted struct{ Token, JTI string }
	if err != nil || r.Status != http.StatusCreated || r.JSON(&minted) != nil {
		g.failErr("B1", "mint a token with a budget", fmt.Errorf("%v %s", err, r.String()))
		return
	}
	defer admin(http.MethodPost, "/v1/gateway/tokens/"+minted.JTI+"/revoke", nil)
	call := func() (fixture.Response, error) {
		return fixture.Do(ctx, http.MethodPost, g.custody.GatewayURL+"/anthropic/v1/messages", "",
			[]byte(`{"model":"`+fixture.ToolUseModel+`","max_tokens":60,"messages":[{"role":"user","content":"look around"}]}`),
			"x-api-key", minted.Token, "anthropic-version", "2023-06-01")
	}
	before, _, err := g.seen(ctx)
	if err != nil {
		g.failErr("B1", "what the provider stand-in received", err)
		return
	}
	first, err := call()
	if err != nil {
		g.failErr("B1", "first call", err)
		return
	}
	g.line("B1", "a token with a budget of 100 output tokens: the first call (max_tokens 60) reaches the model",
		first.Status == http.StatusOK && !fixture.FromGateway(string(first.Body)),
		fmt.Sprintf("%d, %d bytes from the provider", first.Status, len(first.Body)), "want the provider's answer")
	second, err := call()
	if err != nil {
		g.failErr("B2", "second call", err)
		return
	}
	after, _, _ := g.seen(ctx)
	g.line("B2", "the second (60 more do not fit in the 43 left) is refused before it leaves custody",
		second.Status == http.StatusPaymentRequired && strings.TrimSpace(string(second.Body)) == "budget exceeded" &&
			second.Header.Get("X-Should-Retry") == "false" && len(after) == len(before)+1,
		fmt.Sprintf("%s (x-should-retry: %s); the provider got %d request(s)", second.String(), second.Header.Get("X-Should-Retry"), len(after)-len(before)),
		"want 402 budget exceeded, not retried, and only the first call at the provider")
	u, err := admin(http.MethodGet, "/v1/gateway/usage?jti="+minted.JTI+"&group_by=jti,model", nil)
	var usage struct {
		Usage []struct {
			Model string
			Used  struct {
				Requests     int64 `json:"requests"`
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			}
		}
	}
	if err != nil || u.JSON(&usage) != nil {
		g.failErr("B3", "usage on the admin plane", fmt.Errorf("%v %s", err, u.String()))
		return
	}
	b, _ := json.Marshal(usage.Usage)
	ok := len(usage.Usage) == 1 && usage.Usage[0].Used.Requests == 1 && usage.Usage[0].Used.InputTokens == 42 && usage.Usage[0].Used.OutputTokens == 57
	g.line("B3", "the gateway metered what the provider reported: 1 request, 42 input and 57 output tokens", ok, string(b),
		"want one row with the stand-in's usage")
}
