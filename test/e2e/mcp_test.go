package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/mcptool/mcptooltest"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

// TestMCPWithExchangedKey: an agent exchanges its pod's token and uses the
// key as the MCP bearer token against `custody serve`.
func TestMCPWithExchangedKey(t *testing.T) {
	ctx := testCtx(t)
	pod := claimPod(t, ctx, "mcp-agent")
	k := keyOf(t, exchange(t, ctx, custody.URL, podToken(t, ctx, pod)))

	connect := func(key string) (*mcp.ClientSession, error) {
		return mcptooltest.Connect(ctx, custody.URL+"/mcp", fixture.HTTPClient(), key)
	}
	if _, err := connect("ck_not-a-key"); err == nil {
		t.Fatal("MCP connect with a bad key succeeded")
	}
	cs, err := connect(k.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"remember", "recall", "forget", "state_get", "state_lease", "state_put", "state_release"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "remember", Arguments: map[string]any{"kind": "fact", "text": "MCP 记得 this"}})
	if err != nil || res.IsError {
		t.Fatalf("remember = %+v, %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "recall", Arguments: map[string]any{"query": "记得"}})
	if err != nil || res.IsError {
		t.Fatalf("recall = %+v, %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), "MCP 记得 this") {
		t.Errorf("recall result %s lacks the memory", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "recall", Arguments: map[string]any{"query": "x", "agent": "someone-else"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(toolText(res), "namespace_mismatch") {
		t.Errorf("recall in another agent's namespace = %+v, want a namespace_mismatch tool error", res)
	}
	// The memory is visible over HTTP too: one store.
	r := get(t, context.Background(), memoriesURL(custody.URL, k.Tenant, k.Agent)+"?q=%E8%AE%B0%E5%BE%97", k.Key)
	if r.Status != 200 || !strings.Contains(string(r.Body), "MCP") {
		t.Errorf("HTTP recall = %s, want the memory remembered over MCP", r)
	}
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
