package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/signer"
)

type bearerRT struct{ key string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// The MCP proxy glue against a real signer and key service on SQLite and
// a go-sdk upstream: an allowed call is forwarded with the configured
// credential, and while the replica has no signer (standby) calls are
// refused with signer_unavailable and nothing is forwarded.
func TestMCPProxyGlue(t *testing.T) {
	ctx := context.Background()
	e := newSignerEnv(t, "rules:\n  - id: AGENTS-MCP\n    effect: allow\n    tool: \"mcp__tools__*\"\n")
	dir, cfg, keys, s, log := e.dir, e.cfg, e.keys, e.s, e.log
	minted, err := keys.Mint(ctx, apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"}, 0)
	if err != nil {
		t.Fatal(err)
	}

	var calls, badCreds atomic.Int64
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		b, _ := json.Marshal(a)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	uh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "upstream-secret" {
			badCreds.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		uh.ServeHTTP(w, r)
	}))
	defer upSrv.Close()
	must(t, os.WriteFile(filepath.Join(dir, "cred"), []byte("upstream-secret\n"), 0o600))
	cfg.MCPUpstreams = filepath.Join(dir, "upstreams.yaml")
	must(t, os.WriteFile(cfg.MCPUpstreams, []byte("upstreams:\n  - name: tools\n    url: "+upSrv.URL+"\n    tenants: [agents]\n    credential:\n      file: "+filepath.Join(dir, "cred")+"\n      header: X-Api-Key\n"), 0o600))

	var cur atomic.Pointer[signer.Signer]
	cur.Store(s)
	p, err := newMCPProxy(cfg, keys, cur.Load, log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp/servers/", p.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/servers/tools",
		HTTPClient: &http.Client{Transport: bearerRT{minted.Key}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}})
	if err != nil || r.IsError || calls.Load() != 1 {
		t.Fatalf("allowed call = %+v, %v (upstream calls %d), want forwarded", r, err, calls.Load())
	}
	cur.Store(nil)
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 2}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "signer_unavailable") || calls.Load() != 1 {
		t.Errorf("call on a standby replica = %+v, %v (upstream calls %d), want signer_unavailable, not forwarded", r, err, calls.Load())
	}
	if n := badCreds.Load(); n != 0 {
		t.Errorf("upstream refused the credential %d times", n)
	}
	cur.Store(s) // the session's run is closed by Close with a signer
}

// --mcp-upstreams is documented, refused without the signer, and a bad
// file is a usage error naming the field.
func TestMCPUpstreamsFlag(t *testing.T) {
	ctx := context.Background()
	_, help, _ := runCLI(t, ctx, envMap(nil), "", "serve", "--help")
	if !strings.Contains(help, "--mcp-upstreams") || !strings.Contains(help, "--proxy-approval-wait") {
		t.Error("serve --help lacks --mcp-upstreams or --proxy-approval-wait")
	}
	file := filepath.Join(t.TempDir(), "up.yaml")
	must(t, os.WriteFile(file, []byte("upstreams:\n  - name: x\n    url: https://h/\n    tenants: [a]\n    colour: red\n"), 0o600))
	code, _, stderr := runCLI(t, ctx, envMap(nil), "", "serve", "--signer=false", "--mcp-upstreams="+file)
	if code != 2 || !strings.Contains(stderr, "--mcp-upstreams needs the signer") {
		t.Errorf("without the signer: exit %d, %q; want a usage error", code, stderr)
	}
	code, _, stderr = runCLI(t, ctx, envMap(nil), "", "serve", "--mcp-upstreams="+file)
	if code != 2 || !strings.Contains(stderr, `unknown field "colour"`) {
		t.Errorf("bad upstreams file: exit %d, %q; want a usage error naming the field", code, stderr)
	}
}
