package signer

import (
	"errors"
	"fmt"
	"strings"
)

// Call ids of the calls custody's own proxies decide for a sandbox: the
// MCP proxy's (internal/mcpproxy) begin with MCPProxyCallPrefix, the
// egress proxy's with EgressCallPrefix. Custody records such a call's
// decision and its outcome itself, so the agent API (Handler's decide,
// complete and approvals, and the signer MCP tools) refuses these ids
// (400 bad_request): a sandbox cannot complete a call its proxy denied
// and never forwarded, add a second outcome to one it forwarded, or
// decide a call under a proxy's id.
const (
	MCPProxyCallPrefix = "mcp-"
	EgressCallPrefix   = "egress-"
)

// agentCallID refuses a call id the agent API may not use (see
// MCPProxyCallPrefix).
func agentCallID(id string) error {
	for _, p := range []string{MCPProxyCallPrefix, EgressCallPrefix} {
		if strings.HasPrefix(id, p) {
			return errors.Join(ErrInvalid, fmt.Errorf("call_id: ids beginning %q are custody's proxies' calls, recorded by custody only", p))
		}
	}
	return nil
}
