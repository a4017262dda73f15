package sdk

import (
	"context"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

func anthropicClient(provider, token string) (anthropic.Client, *attempts) {
	hc, n := countingClient()
	return anthropic.NewClient(option.WithBaseURL(gw.gatewayURL+"/"+provider+"/"), option.WithAPIKey(token), option.WithHTTPClient(hc)), n
}

func messageParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
}

func TestAnthropicCallAndStream(t *testing.T) {
	from := len(up.credentials())
	tok := mint(t, "anthropic")
	c, _ := anthropicClient("anthropic", tok.Token)
	ctx := context.Background()
	msg, err := c.Messages.New(ctx, messageParams("claude-standin"))
	if err != nil {
		t.Fatalf("Messages.New: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "hello" {
		t.Fatalf("content = %+v, want one text block hello", msg.Content)
	}
	id := streamID()
	s := c.Messages.NewStreaming(ctx, messageParams("gated."+id+".5"))
	var got string
	for s.Next() {
		ev := s.Current()
		if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			got += d.Delta.Text
			release(t, id)
		}
	}
	checkWholeStream(t, s.Err(), got, from)
}

func TestAnthropicRevoked(t *testing.T) {
	tok := mint(t, "anthropic")
	revoke(t, tok.JTI)
	c, n := anthropicClient("anthropic", tok.Token)
	_, err := c.Messages.New(context.Background(), messageParams("claude-standin"))
	checkRefusal(t, "call with a revoked token", err, "gateway token revoked")
	checkOneAttempt(t, n)
}

func TestAnthropicRevokedMidStream(t *testing.T) {
	tok := mint(t, "anthropic")
	c, _ := anthropicClient("anthropic", tok.Token)
	s := c.Messages.NewStreaming(context.Background(), messageParams("hold."+streamID()))
	for s.Next() {
		if _, ok := s.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			break
		}
	}
	if s.Err() != nil {
		t.Fatalf("no first text event: %v", s.Err())
	}
	revoke(t, tok.JTI)
	for s.Next() {
	}
	err := s.Err()
	checkRefusal(t, "stream cut by revocation", err, "gateway token revoked")
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("stream error %T %v, want the SDK's typed *anthropic.Error", err, err)
	}
}

func TestAnthropicRefusalNotRetried(t *testing.T) {
	tok := mint(t, "nokey-anthropic")
	c, n := anthropicClient("nokey-anthropic", tok.Token)
	_, err := c.Messages.New(context.Background(), messageParams("claude-standin"))
	checkRefusal(t, "call to a provider without a key", err, "gateway holds no key for provider nokey-anthropic")
	checkOneAttempt(t, n)
}

// TestAnthropicProviderToolRefused: the SDK's own web fetch tool is
// refused by the gateway (the provider would fetch a URL the sandbox
// names), as a typed 403 the SDK does not retry; the same request
// without it goes through.
func TestAnthropicProviderToolRefused(t *testing.T) {
	tok := mint(t, "anthropic")
	c, n := anthropicClient("anthropic", tok.Token)
	p := messageParams("claude-standin")
	p.Tools = []anthropic.ToolUnionParam{{OfWebFetchTool20250910: &anthropic.WebFetchTool20250910Param{}}}
	_, err := c.Messages.New(context.Background(), p)
	checkRefusal(t, "call with the web fetch tool", err, "provider-run tool not allowed for provider anthropic: /tools/0 type web_fetch_20250910")
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 403 {
		t.Errorf("error %v, want a 403 anthropic.Error", err)
	}
	checkOneAttempt(t, n)
	p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "read_file", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}}}}}
	if _, err := c.Messages.New(context.Background(), p); err != nil {
		t.Errorf("call with a caller-run tool: %v", err)
	}
}
