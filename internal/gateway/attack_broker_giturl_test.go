package gateway

import (
	"strings"
	"testing"
)

// TestAttackGitHubEnterpriseGitURL: a github provider whose REST API is
// not api.github.com (GitHub Enterprise) holds that server's credential;
// without a GitURL its git requests, and so that credential in Basic
// auth, must not go to github.com: the configuration is refused.
func TestAttackGitHubEnterpriseGitURL(t *testing.T) {
	for name, cfg := range map[string]map[string]ProviderConfig{
		"another provider":  {"ghe": {Kind: KindGitHub, BaseURL: "https://ghe.example.com/api/v3"}},
		"github overridden": {"github": {BaseURL: "https://ghe.example.com/api/v3"}},
	} {
		ps, err := buildProviders(cfg)
		if err == nil {
			for n, p := range ps {
				if p.kind == KindGitHub && p.base.Host != "api.github.com" && p.git.Host == "github.com" {
					t.Errorf("%s: provider %s sends its credential for %s to %s", name, n, p.base, p.git)
				}
			}
			continue
		}
		if !strings.Contains(err.Error(), "GitURL") {
			t.Errorf("%s: buildProviders = %v, want an error naming GitURL", name, err)
		}
	}
	// The built-in one keeps both GitHub defaults.
	ps, err := buildProviders(map[string]ProviderConfig{"github": {AllowPaths: []string{"GET /meta"}}})
	if err != nil || ps["github"].git.String() != DefaultGitHubGitURL {
		t.Errorf("buildProviders(github) = %v, want the default git URL", err)
	}
}
