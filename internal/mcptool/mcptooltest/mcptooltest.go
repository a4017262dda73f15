// Package mcptooltest is the client side of custody's MCP tools for tests:
// a session that sends a bearer key on every request, and a tool call
// that returns the refusal text or decodes the structured result.
package mcptooltest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds "Authorization: Bearer <key>" to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// Connect opens a streamable-HTTP MCP session to endpoint through hc
// (nil: http.DefaultClient), sending key as a bearer token unless it is
// empty. It does not retry and opens no standalone SSE stream.
func Connect(ctx context.Context, endpoint string, hc *http.Client, key string) (*mcp.ClientSession, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	if key != "" {
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc = &http.Client{Transport: bearer{key: key, base: base}, Timeout: hc.Timeout}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "custody-test", Version: "1"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
}

// Call calls tool with args. For a tool error it returns its text (the
// refusal body); otherwise it decodes the structured result into out (if
// not nil) and returns "". A failed call fails t.
func Call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, out any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s) = %v", tool, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("CallTool(%s) result %s: %v", tool, raw, err)
		}
	}
	return ""
}
