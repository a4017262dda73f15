package incluster

import (
	"fmt"

	"github.com/agentcustody/custody/test/e2e/netcheck"
)

// Names of the network targets in [Deployment.Targets].
const (
	TCustodyAPI = "custody API by Service DNS"
	TGateway    = "custody gateway by Service DNS"
	TStore      = "store (PostgreSQL Service)"
	TProvider   = "provider stand-in pod by IP"
	TAPIServer  = "API server (kubernetes.default)"
	TOther      = "pod in namespace other"
	TMetrics    = "custody metrics port"
	TAdmin      = "custody admin port"
	TMCP        = "MCP server pod by IP"
)

// Targets are the seeds' paired probes for a sandbox: Allowed, custody's
// API and gateway by the Service DNS name the template gives the agent;
// MustFail, the store (by its Service name), the provider stand-in (by
// pod IP, so DNS cannot fake it), the API server (kubernetes.default),
// a pod in another namespace, custody's metrics and admin ports (by
// custody's pod IP), and the upstream MCP server (by pod IP: the sandbox
// reaches it only through custody's MCP proxy).
func (d *Deployment) Targets() (allowed, mustFail []netcheck.Target) {
	ip := d.Pod.Status.PodIP
	allowed = []netcheck.Target{
		{Name: TCustodyAPI, Addr: fmt.Sprintf("custody.custody-system.svc.cluster.local:%d", APIPort)},
		{Name: TGateway, Addr: fmt.Sprintf("custody.custody-system.svc.cluster.local:%d", GatewayPort)},
	}
	mustFail = []netcheck.Target{
		{Name: TStore, Addr: d.StoreAddr},
		{Name: TProvider, Addr: fmt.Sprintf("%s:%d", d.ProviderIP, ProviderPort)},
		{Name: TAPIServer, Addr: "kubernetes.default.svc.cluster.local:443"},
		{Name: TOther, Addr: fmt.Sprintf("%s:%d", d.OtherIP, ProviderPort)},
		{Name: TMetrics, Addr: fmt.Sprintf("%s:%d", ip, MetricsPort)},
		{Name: TAdmin, Addr: fmt.Sprintf("%s:%d", ip, AdminPort)},
		{Name: TMCP, Addr: fmt.Sprintf("%s:%d", d.MCPIP, MCPPort)},
	}
	return allowed, mustFail
}
