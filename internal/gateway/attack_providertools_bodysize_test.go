package gateway

import (
	"strings"
	"testing"
	"time"
)

// FINDING (medium, false positive that breaks real use): the check reads
// every model request whole and refuses one over maxModelBody (16 MiB)
// with 413, where before only tokens with a models allow-list were
// bounded. Anthropic takes Messages requests up to 32 MB
// (docs.anthropic.com/en/api/overview, "Request size limits: Standard
// endpoints (Messages, Token Counting): 32 MB"), and agents reach that:
// Claude Code resends the whole conversation, screenshots included, on
// every turn (anthropics/claude-code#56674, "Request too large (max
// 32MB)" after a few messages). An ordinary request of four 5 MB base64
// images (Anthropic's per-image limit) is refused by the gateway though
// it asks the provider to connect nowhere; the conversation is stuck from
// then on. The check needs no whole body: it could scan the stream (or
// hold up to the provider's own limit) instead of refusing what it did not
// read.
func TestAttackProviderToolsLargeOrdinaryBody(t *testing.T) {
	// A 20 MiB body under -race on 2 shared cores: the revocation view
	// must not go stale (default 2 s here) while it is read; staleness
	// is not what this tests.
	e := newEnv(t, defaultPaths(nil), func(o *Options) { o.MaxStaleness = time.Minute })
	e.client.Timeout = 3 * time.Minute
	tok := e.mint(t, Grant{Providers: []string{"anthropic"}}).Token
	img := strings.Repeat("A", 5<<20) // 5 MiB of base64
	var sb strings.Builder
	sb.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":[`)
	for i := range 4 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}}`)
	}
	sb.WriteString(`,{"type":"text","text":"What changed between these screenshots?"}]}]}`)
	attackExpectForwarded(t, e, tok, "anthropic", "/v1/messages", sb.String())
}
