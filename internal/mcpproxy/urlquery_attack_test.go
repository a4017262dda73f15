package mcpproxy_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAttackUpstreamURLQueryLogged: an upstream's url may carry a query
// (Validate refuses user info only), and hosted MCP servers commonly
// take their key there (?api_key=...). When the upstream cannot be
// reached, the proxy logs the connect error at Warn, and net/http's
// error quotes the request URL, query included, so the key is written
// to custody's log on every failed connection (net/http strips a
// user-info password from that message, not a query). Here the query
// carries the same secret the test's credential file holds; newEnv's
// cleanup fails the test if any log line contains it. Either refuse a
// query in an upstream url (as gateway upstreams do) or log the error
// without the URL.
func TestAttackUpstreamURLQueryLogged(t *testing.T) {
	const secret = "upstream-secret-zzzzzzzzzzzzzzzz" // newEnv's credential, which its cleanup looks for in the logs
	e := newEnv(t, func(o *mcpproxy.Options) {
		cfg, err := mcpproxy.ParseConfig([]byte(`upstreams:
  - name: up
    url: https://mcp.example/mcp?api_key=` + secret + `
    tenants: [agents]
`))
		if err != nil {
			return // refused at load: the key never reaches a log (newEnv's own config stays)
		}
		o.Config = cfg
		o.Transport = rtFunc(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection refused")
		})
	})
	cs, _ := e.mustConnect(e.key, "")
	_, err := cs.ListTools(t.Context(), &mcp.ListToolsParams{})
	if err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Logf("tools/list = %v", err)
	}
}
