package cli

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/runlease"
)

func TestExecBrokerFlags(t *testing.T) {
	c := execConfig{providers: []string{"anthropic"}, githubProvider: "github",
		githubRepos: []string{"octo/hello=read", "octo/site=write", "octo/docs"}, brokerNames: []string{"acme"}}
	got, err := c.brokers()
	if err != nil {
		t.Fatal(err)
	}
	want := []runlease.Broker{
		{Provider: "github", Git: true, Repos: []runlease.RepoGrant{{Repo: "octo/hello", Access: "read"}, {Repo: "octo/site", Access: "write"}, {Repo: "octo/docs", Access: "read"}}},
		{Provider: "acme"},
	}
	if len(got) != 2 || got[0].Provider != "github" || !got[0].Git || !slices.Equal(got[0].Repos, want[0].Repos) || got[1].Provider != "acme" || got[1].Git {
		t.Errorf("brokers() = %+v, want %+v", got, want)
	}

	ctx := context.Background()
	withToken := envMap(map[string]string{"CUSTODY_ADMIN_TOKEN": "t"})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad access", []string{"--github-repo=octo/hello=admin"}, "--github-repo"},
		{"no owner", []string{"--github-repo=hello=read"}, "--github-repo"},
		{"three parts", []string{"--github-repo=a/b/c=read"}, "--github-repo"},
		{"github provider alone", []string{"--github-provider=ghe"}, "--github-provider"},
		{"broker twice", []string{"--broker=acme", "--broker=acme"}, "twice"},
		{"broker is the model provider", []string{"--broker=anthropic"}, "twice"},
		{"bad broker name", []string{"--broker=Acme Corp"}, "--broker"},
		{"nothing at all", []string{"--provider="}, "at least one --provider, --github-repo or --broker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"exec", "--admin=http://127.0.0.1:1"}, tc.args...), "--", "true")
			code, _, stderr := runCLI(t, ctx, withToken, "", args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("custody %v = exit %d, stderr %q; want exit 2 mentioning %q", args, code, stderr, tc.want)
			}
		})
	}
	code, out, _ := runCLI(t, ctx, envMap(nil), "", "exec", "--help")
	for _, want := range []string{"--github-repo", "--github-provider", "--broker", "CUSTODY_GITHUB_TOKEN", "insteadOf", "GH_TOKEN"} {
		if !strings.Contains(out, want) {
			t.Errorf("exec --help lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("exec --help exit %d", code)
	}
}
