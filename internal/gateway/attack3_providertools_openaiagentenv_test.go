package gateway

import "testing"

// FINDING (medium, with OpenAI's agents endpoints added): OpenAI's
// hosted agent environments take their network from the request in a
// member the scan does not read: POST /v1/agents/environments
// {"environment":{"type":"openai_hosted","network":{"access":"enabled"}}}
// or {"access":"restricted","allowed_domains":[...]} (openai-go v3.98.0
// betaagentenvironment.go path "agents/environments",
// BetaAgentEnvironmentNewParams.Environment; betaagent.go
// EnvironmentParamOpenAIHosted.Network "Network access policy for the
// environment", EnvironmentParamOpenAIHostedNetwork.Access "Any of
// \"enabled\", \"disabled\", \"restricted\"", AllowedDomains). The agent
// then runs commands, and a desktop browser, in that OpenAI-hosted
// environment, so they reach any host (or the hosts the sandbox listed).
// It is the same hole as network_policy, which the scan refuses, under
// another name ("network" with "access"); it is forwarded.
func TestAttackProviderToolsOpenAIAgentEnvironmentNetwork(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/agents/environments"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	for _, body := range []string{
		`{"environment":{"type":"openai_hosted","network":{"access":"enabled"}}}`,
		`{"environment":{"type":"openai_hosted","network":{"access":"restricted","allowed_domains":["exfil.attacker.example"]},"desktop":{"enabled":true}}}`,
	} {
		attackExpectRefused(t, e, tok, "openai", "/v1/agents/environments", body, nil)
	}
}
