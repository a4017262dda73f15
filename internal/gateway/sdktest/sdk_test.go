// Package sdktest runs the official provider SDKs (openai-go,
// anthropic-sdk-go, genai) against the gateway, as a sandbox would: the
// SDK's API key is the gateway token and its base URL the gateway. It is
// its own module so that the SDKs never become dependencies of custody.
// Run it with
//
//	cd internal/gateway/sdktest && go test ./...
package sdktest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

// env is a gateway whose providers all point at one upstream; the
// "nokey" provider (OpenAI kind) has no key file.
type env struct {
	g        *gateway.Gateway
	url      string
	keys     string       // the key files' directory
	requests atomic.Int32 // requests the gateway's data port received
	upstream func(w http.ResponseWriter, r *http.Request)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.upstream(w, r) }))
	t.Cleanup(up.Close)
	db, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	keys := t.TempDir()
	for _, p := range []string{"anthropic", "openai", "gemini"} {
		if err := os.WriteFile(filepath.Join(keys, p), []byte("real-key-"+p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, sk, _ := ed25519.GenerateKey(rand.Reader)
	providers := map[string]gateway.ProviderConfig{"nokey": {BaseURL: up.URL}}
	for _, p := range []string{"anthropic", "openai", "gemini"} {
		providers[p] = gateway.ProviderConfig{BaseURL: up.URL}
	}
	e.g, err = gateway.New(context.Background(), gateway.Options{
		Store: db, Providers: providers, KeysDir: keys, SigningKey: sk,
		Log: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.g.Close() })
	data := e.g.DataHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		data.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.keys = keys
	return e
}

func (e *env) mint(t *testing.T, providers ...string) gateway.Minted {
	t.Helper()
	m, err := e.g.Mint(context.Background(), gateway.Grant{Providers: providers})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSDKsDoNotRetryRefusals: a fixed refusal (502 gateway holds no key)
// reaches each SDK once, not once per retry.
func TestSDKsDoNotRetryRefusals(t *testing.T) {
	e := newEnv(t)
	e.upstream = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }
	tok := e.mint(t, "nokey").Token
	ctx := context.Background()

	oc := openai.NewClient(openaioption.WithBaseURL(e.url+"/nokey/v1"), openaioption.WithAPIKey(tok))
	_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusBadGateway {
		t.Errorf("openai-go: err = %v, want the 502 refusal", err)
	}
	if n := e.requests.Swap(0); n != 1 {
		t.Errorf("openai-go sent the refused request %d times, want 1", n)
	}

	tok = e.mint(t, "anthropic").Token // anthropic's key file is removed below
	if err := os.Remove(filepath.Join(e.keys, "anthropic")); err != nil {
		t.Fatal(err)
	}
	waitNoKey(t, e, "anthropic")
	e.requests.Store(0)
	ac := anthropic.NewClient(anthropicoption.WithBaseURL(e.url+"/anthropic"), anthropicoption.WithAPIKey(tok))
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "claude-x", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadGateway {
		t.Errorf("anthropic-sdk-go: err = %v, want the 502 refusal", err)
	}
	if n := e.requests.Load(); n != 1 {
		t.Errorf("anthropic-sdk-go sent the refused request %d times, want 1", n)
	}
}

// waitNoKey waits until the gateway noticed provider p's key file is gone.
func waitNoKey(t *testing.T, e *env, p string) {
	t.Helper()
	tok := e.mint(t, p).Token
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("POST", e.url+"/"+p+"/v1/messages", strings.NewReader("{}"))
		req.Header.Set("x-api-key", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadGateway {
			return
		}
	}
	t.Fatalf("gateway still holds a key for %s", p)
}

// streamUpstream answers a stream with first, then waits for the request
// to be cut (the revocation cancels it upstream too).
func streamUpstream(first string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
}

// TestSDKStreamRevoked: a stream cut by a revocation reaches each SDK as
// an error naming the refusal, not as unexpected EOF.
func TestSDKStreamRevoked(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "gateway token revoked") {
			t.Errorf("stream error = %v, want one naming gateway token revoked", err)
		}
	}
	t.Run("anthropic", func(t *testing.T) {
		e := newEnv(t)
		m := e.mint(t, "anthropic")
		e.upstream = streamUpstream("event: message_start\ndata: " + `{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}}` + "\n\n")
		c := anthropic.NewClient(anthropicoption.WithBaseURL(e.url+"/anthropic"), anthropicoption.WithAPIKey(m.Token))
		s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: "claude-x", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		if !s.Next() {
			t.Fatalf("no first event: %v", s.Err())
		}
		if err := e.g.Revoke(ctx, m.JTI); err != nil {
			t.Fatal(err)
		}
		for s.Next() {
		}
		check(t, s.Err())
	})
	t.Run("openai", func(t *testing.T) {
		e := newEnv(t)
		m := e.mint(t, "openai")
		e.upstream = streamUpstream(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n")
		c := openai.NewClient(openaioption.WithBaseURL(e.url+"/openai/v1"), openaioption.WithAPIKey(m.Token))
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		if !s.Next() {
			t.Fatalf("no first event: %v", s.Err())
		}
		if err := e.g.Revoke(ctx, m.JTI); err != nil {
			t.Fatal(err)
		}
		for s.Next() {
		}
		check(t, s.Err())
	})
	t.Run("gemini", func(t *testing.T) {
		e := newEnv(t)
		m := e.mint(t, "gemini")
		e.upstream = streamUpstream(`data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"}}]}` + "\n\n")
		c, err := genai.NewClient(ctx, &genai.ClientConfig{
			APIKey: m.Token, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: e.url + "/gemini/"},
		})
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		first := true
		for resp, err := range c.Models.GenerateContentStream(ctx, "gemini-x", genai.Text("hi"), nil) {
			if err != nil {
				errs = append(errs, err)
				break
			}
			if first {
				first = false
				if resp.Text() != "hi" {
					t.Errorf("first chunk = %q", resp.Text())
				}
				if err := e.g.Revoke(ctx, m.JTI); err != nil {
					t.Fatal(err)
				}
			}
		}
		if first || len(errs) != 1 {
			t.Fatalf("got first chunk %v and errors %v", !first, errs)
		}
		check(t, errs[0])
		if _, ok := errs[0].(genai.APIError); !ok {
			t.Errorf("error is %T, want genai.APIError", errs[0])
		}
	})
}
