package runlease

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Broker is one further gateway token a run hands its process besides
// the model token: scoped to one brokered gateway provider (kind http or
// github) alone, so that a leak of one token does not widen another's
// scope, minted and revoked with the run's.
type Broker struct {
	// Provider is the gateway provider's name, e.g. "github" or "acme"
	// ([a-z0-9][a-z0-9_-]*, at most 63 bytes).
	Provider string
	// Repos are, for a provider of kind github, the repositories the
	// token may use (the gateway refuses the token for any other, and
	// refuses repos for other kinds).
	Repos []RepoGrant
	// Git says the provider is of kind github: the process's git is
	// configured, through its environment only, to take the token from
	// it for the provider's URL (see [GitEnv]).
	Git bool
}

// RepoGrant is one repository a github token may use: Repo "OWNER/NAME",
// Access "read" (clone, fetch, REST GET) or "write" (also push and REST
// writes).
type RepoGrant struct {
	Repo   string `json:"repo"`
	Access string `json:"access"`
}

// brokerName is the shape of a brokered provider's name.
var brokerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// TokenVar and URLVar are the variables a brokered token and its
// provider's gateway URL are handed in: CUSTODY_<NAME>_TOKEN and
// CUSTODY_<NAME>_URL, NAME upper-cased with "-" as "_" (for "github":
// CUSTODY_GITHUB_TOKEN, CUSTODY_GITHUB_URL).
func TokenVar(provider string) string { return "CUSTODY_" + envName(provider) + "_TOKEN" }

// URLVar: see [TokenVar].
func URLVar(provider string) string { return "CUSTODY_" + envName(provider) + "_URL" }

func envName(provider string) string {
	return strings.ToUpper(strings.ReplaceAll(provider, "-", "_"))
}

// CheckBrokers returns why brokers cannot be handed to one process: a bad
// name, a provider twice (or one the model token already covers, whose
// variables would collide), two whose variables would collide ("a-b" and
// "a_b"), repos on a provider that is not git.
func CheckBrokers(brokers []Broker, providers []string) error {
	seen := map[string]bool{}
	for _, p := range providers {
		seen[p] = true
	}
	vars := map[string]string{} // TokenVar of each broker: "a-b" and "a_b" share one
	for _, b := range brokers {
		switch {
		case !brokerName.MatchString(b.Provider):
			return fmt.Errorf("brokered provider %q: want a gateway provider name", b.Provider)
		case seen[b.Provider]:
			return fmt.Errorf("brokered provider %s given twice", b.Provider)
		case vars[TokenVar(b.Provider)] != "":
			return fmt.Errorf("brokered providers %s and %s would share %s", vars[TokenVar(b.Provider)], b.Provider, TokenVar(b.Provider))
		case len(b.Repos) > 0 && !b.Git:
			return fmt.Errorf("brokered provider %s: repos are for a github provider", b.Provider)
		case b.Git && len(b.Repos) == 0:
			return fmt.Errorf("brokered provider %s: a github token needs at least one repository", b.Provider)
		}
		for _, r := range b.Repos {
			if r.Access != "read" && r.Access != "write" {
				return fmt.Errorf("brokered provider %s: repo %s: access must be read or write", b.Provider, r.Repo)
			}
		}
		seen[b.Provider] = true
		vars[TokenVar(b.Provider)] = b.Provider
	}
	return nil
}

// GitHubCom is where GitEnv sends git URLs of the built-in github
// provider from.
const GitHubCom = "https://github.com/"

// gitUser is the username the credential helper gives git; the gateway
// ignores it.
const gitUser = "x-access-token"

// GitEnv is the environment that configures git, for this process only
// (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>, which git
// reads after every config file), to authenticate to
// <gatewayURL>/<provider>/ for each provider with a credential helper
// that prints the token from the process's own TokenVar(provider): the
// token is never written to a file or put in an argv. For each provider
// it sets
//
//	credential.<gw>/<provider>/.helper = ""       (drops helpers configured before, e.g. a "store")
//	credential.<gw>/<provider>/.helper = !f() { test "$1" = get && printf 'username=x-access-token\npassword=%s\n' "$CUSTODY_<NAME>_TOKEN"; }; f
//
// and, for the provider named "github",
//
//	url.<gw>/github/.insteadOf = https://github.com/
//
// so that "git clone https://github.com/OWNER/NAME" goes through the
// gateway; and, if caFile (a path in the sandbox) is set,
//
//	http.<gw>/<provider>/.sslCAInfo = <caFile>
//
// so that git (whose libcurl may not honour SSL_CERT_FILE) trusts an
// https gateway, for the gateway's URLs alone (a GIT_SSL_CAINFO in the
// process's environment takes precedence over it). It returns nil for no
// providers.
func GitEnv(gatewayURL, caFile string, providers []string) map[string]string {
	if len(providers) == 0 {
		return nil
	}
	gw := strings.TrimRight(gatewayURL, "/")
	var kv [][2]string
	for _, p := range providers {
		base := gw + "/" + p + "/"
		helper := `!f() { test "$1" = get && printf 'username=` + gitUser + `\npassword=%s\n' "$` + TokenVar(p) + `"; }; f`
		kv = append(kv, [2]string{"credential." + base + ".helper", ""}, [2]string{"credential." + base + ".helper", helper})
		if p == "github" {
			kv = append(kv, [2]string{"url." + base + ".insteadOf", GitHubCom})
		}
		if caFile != "" {
			kv = append(kv, [2]string{"http." + base + ".sslCAInfo", caFile})
		}
	}
	env := map[string]string{"GIT_CONFIG_COUNT": strconv.Itoa(len(kv))}
	for i, e := range kv {
		env["GIT_CONFIG_KEY_"+strconv.Itoa(i)] = e[0]
		env["GIT_CONFIG_VALUE_"+strconv.Itoa(i)] = e[1]
	}
	return env
}

// BrokerEnv is the environment that hands each brokered token to the
// process: TokenVar and URLVar (<gatewayURL>/<provider>) of each, and
// [GitEnv] (with caFile) for the git ones. tokens[i] is brokers[i]'s token. GH_TOKEN
// and GITHUB_TOKEN are not set: gh and other GitHub clients would send
// the gateway token to api.github.com, which does not take it; point a
// client at CUSTODY_GITHUB_URL as its API base URL instead.
func BrokerEnv(brokers []Broker, gatewayURL, caFile string, tokens []string) (map[string]string, error) {
	if len(tokens) != len(brokers) {
		return nil, errors.New("runlease: one token per brokered provider is required")
	}
	gw := strings.TrimRight(gatewayURL, "/")
	env := map[string]string{}
	var git []string
	for i, b := range brokers {
		env[TokenVar(b.Provider)] = tokens[i]
		env[URLVar(b.Provider)] = gw + "/" + b.Provider
		if b.Git {
			git = append(git, b.Provider)
		}
	}
	for k, v := range GitEnv(gatewayURL, caFile, git) {
		env[k] = v
	}
	return env, nil
}
