package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcptool/mcptooltest"
)

type echoArgs struct {
	Word string `json:"word" jsonschema:"a word"`
}

type echoOut struct {
	Word  string `json:"word"`
	Agent string `json:"agent"`
}

var errRefused = errors.New("refused: secret-store-detail")

// TestAddServesAsTheKeyAndRefusesWithTheBody serves one tool: it runs as
// the verified key's identity, a refusal reaches the client as exactly
// the refusal body (never the error's own text), and a request without a
// live key never reaches the tool.
func TestAddServesAsTheKeyAndRefusesWithTheBody(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var refusedWith error
	srv := NewServer("custody-test", "test", log, func(_ context.Context, tool string, err error) []byte {
		refusedWith = err
		return []byte(`{"error":"forbidden","message":"` + tool + ` refused"}`)
	})
	calls := 0
	Add(srv, &mcp.Tool{Name: "echo", Description: "echo a word"}, func(_ context.Context, rec apikey.Record, a echoArgs) (echoOut, error) {
		calls++
		if a.Word == "no" {
			return echoOut{}, errRefused
		}
		return echoOut{Word: a.Word, Agent: rec.Identity.Agent}, nil
	})
	verify := func(_ context.Context, key string) (apikey.Record, error) {
		if key != "good-key" {
			return apikey.Record{}, apikey.ErrUnauthenticated
		}
		return apikey.Record{Identity: apikey.Identity{Tenant: "agents", Agent: "support-agent"}, ExpiresAt: time.Now().Add(time.Hour)}, nil
	}
	hs := httptest.NewServer(srv.Handler(verify, 1<<20))
	defer hs.Close()

	connect := func(tok string) (*mcp.ClientSession, error) {
		return mcptooltest.Connect(context.Background(), hs.URL, nil, tok)
	}
	if cs, err := connect("bad-key"); err == nil {
		cs.Close()
		t.Fatal("connect with a refused key succeeded")
	}
	cs, err := connect("good-key")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"word": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("echo hi: %v %+v", err, res)
	}
	if out, _ := res.StructuredContent.(map[string]any); out["agent"] != "support-agent" || out["word"] != "hi" {
		t.Fatalf("echo hi = %v, want the word as the key's agent", res.StructuredContent)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"word": "no"}})
	if err != nil || !res.IsError || len(res.Content) != 1 {
		t.Fatalf("echo no: %v %+v, want one tool error", err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if text != `{"error":"forbidden","message":"echo refused"}` || strings.Contains(text, "secret-store-detail") {
		t.Fatalf("refusal text %q, want exactly the refusal body", text)
	}
	if !errors.Is(refusedWith, errRefused) {
		t.Fatalf("refuse got %v, want the tool's error", refusedWith)
	}
	if calls != 2 {
		t.Fatalf("tool ran %d times, want 2", calls)
	}
}

func TestSchemaInfersRawMessageAsAny(t *testing.T) {
	s := Schema[struct {
		Word string          `json:"word" jsonschema:"a word"`
		Args json.RawMessage `json:"args"`
	}]()
	if w := s.Properties["word"]; w == nil || w.Description != "a word" || w.Type != "string" {
		t.Fatalf("word: %+v, want a described string", w)
	}
	if a := s.Properties["args"]; a == nil || a.Type != "" || len(a.Types) != 0 {
		t.Fatalf("args: %+v, want any JSON value (no type)", a)
	}
}
