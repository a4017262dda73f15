package cli

import (
	"fmt"
	"strings"

	"github.com/agentcustody/custody/internal/runlease"
)

// execBrokerHelp is the part of exec's help about brokered tokens.
const execBrokerHelp = `
Brokered credentials get tokens of their own, each scoped to one gateway provider
and revoked with the rest:
  --github-repo OWNER/NAME=read|write (repeatable) mints a token for the github
    provider (--github-provider) valid for those repositories only, handed as
    CUSTODY_GITHUB_TOKEN and CUSTODY_GITHUB_URL=<gateway-url>/github; git is set up
    through the process's environment alone (GIT_CONFIG_COUNT/KEY/VALUE): a
    credential helper that reads the token from CUSTODY_GITHUB_TOKEN for
    <gateway-url>/github/ (helpers configured elsewhere, e.g. "store", are dropped
    for that URL), and url.<gateway-url>/github/.insteadOf https://github.com/, so
    "git clone https://github.com/OWNER/NAME" goes through the gateway (with
    --sandbox-ca-file, git also trusts that CA for the gateway's URLs). GH_TOKEN and
    GITHUB_TOKEN are not set (gh would send the token to api.github.com); use
    CUSTODY_GITHUB_URL as a REST base URL with "Authorization: Bearer $CUSTODY_GITHUB_TOKEN".
  --broker NAME (repeatable) mints a token for the kind-http provider NAME, handed as
    CUSTODY_<NAME>_TOKEN and CUSTODY_<NAME>_URL=<gateway-url>/<name> (NAME upper-cased,
    "-" as "_").
  --provider= (empty) mints no model token.
`

// brokers parses --github-repo, --github-provider and --broker.
func (c execConfig) brokers() ([]runlease.Broker, error) {
	var out []runlease.Broker
	if len(c.githubRepos) > 0 {
		b := runlease.Broker{Provider: c.githubProvider, Git: true}
		for _, r := range c.githubRepos {
			repo, access, ok := strings.Cut(r, "=")
			if !ok {
				access = "read"
			}
			owner, name, ok2 := strings.Cut(repo, "/")
			if owner == "" || name == "" || !ok2 || strings.Contains(name, "/") || (access != "read" && access != "write") {
				return nil, fmt.Errorf("exec: --github-repo %q: want OWNER/NAME=read or OWNER/NAME=write", r)
			}
			b.Repos = append(b.Repos, runlease.RepoGrant{Repo: repo, Access: access})
		}
		out = append(out, b)
	} else if c.githubProvider != "github" {
		return nil, fmt.Errorf("exec: --github-provider %q without --github-repo", c.githubProvider)
	}
	for _, name := range c.brokerNames {
		out = append(out, runlease.Broker{Provider: name})
	}
	if err := runlease.CheckBrokers(out, c.providers); err != nil {
		return nil, fmt.Errorf("exec: --github-repo, --broker: %w", err)
	}
	return out, nil
}
