package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentcustody/custody/internal/gateway/gittest"
	"github.com/agentcustody/custody/internal/runlease"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

// demoGitCredential is the real git credential custody holds for the
// demo's git server; git in the demo never sees it.
const demoGitCredential = "ghp_demo0000000000000000000000000000credential"

// gitScenario shows the gateway brokering a git credential: a git server
// (Debian's git http-backend) that demands the real credential, a custody
// on this machine holding it for its github provider, and the real git
// client given only a gateway token scoped to repositories, through the
// environment custody exec gives a process (a credential helper reading
// the token from it, github.com rewritten to the gateway).
type gitScenario struct {
	*scenario
	bin, dir string
}

func (g *gitScenario) run(ctx context.Context) {
	gdir := filepath.Join(g.dir, "git")
	srv, err := gittest.Start(filepath.Join(gdir, "server"), "x-access-token", demoGitCredential)
	if err != nil {
		g.failErr("K0", "git server (git http-backend)", err)
		return
	}
	defer srv.Close()
	for _, repo := range []string{"octo/hello", "octo/site", "octo/private"} {
		if _, err := srv.Create(repo, "# "+repo+"\n"); err != nil {
			g.failErr("K0", "create "+repo, err)
			return
		}
	}
	keys := filepath.Join(gdir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		g.failErr("K0", "keys dir", err)
		return
	}
	if err := os.WriteFile(filepath.Join(keys, "github"), []byte(demoGitCredential), 0o600); err != nil {
		g.failErr("K0", "credential file", err)
		return
	}
	// Only the gateway matters here: no Kubernetes, one static identity
	// nobody holds (serve needs an auth method).
	static := filepath.Join(gdir, "static-tokens.yaml")
	if err := os.WriteFile(static, []byte("tokens:\n  - sha256: "+sha256Hex(demoGitCredential+"-unused")+"\n    tenant: demo\n    agent: git\n    session: host\n"), 0o600); err != nil {
		g.failErr("K0", "static tokens file", err)
		return
	}
	c, err := fixture.StartCustody(ctx, g.bin, filepath.Join(gdir, "custody"), "--signer=false",
		"--kubernetes-auth=false", "--static-tokens-file="+static,
		"--gateway-keys-dir="+keys, "--gateway-provider=github=github:"+srv.URL, "--gateway-provider-git-url=github="+srv.URL)
	if err != nil {
		g.failErr("K0", "custody with a github provider", err)
		return
	}
	defer c.Stop()
	fmt.Printf("   git server %s (demands the real credential); custody's gateway %s holds it\n", srv.URL, c.GatewayURL)

	r, err := fixture.Do(ctx, http.MethodPost, c.AdminURL+"/v1/gateway/tokens", c.AdminToken, map[string]any{
		"providers": []string{"github"}, "ttl_seconds": 600,
		"repos": []map[string]string{{"repo": "octo/hello", "access": "write"}, {"repo": "octo/site", "access": "read"}},
	})
	var minted struct{ Token, JTI string }
	if err != nil || r.Status != http.StatusCreated || r.JSON(&minted) != nil {
		g.failErr("K1", "mint a github token", fmt.Errorf("%v %s", err, r.String()))
		return
	}
	fmt.Println("   token scoped to octo/hello (write) and octo/site (read); git gets it only from its environment")
	env := gittest.EnvIn(filepath.Join(gdir, "home"))
	genv := runlease.GitEnv(c.GatewayURL, c.CAFile, []string{"github"})
	keysSorted := make([]string, 0, len(genv))
	for k := range genv {
		keysSorted = append(keysSorted, k)
	}
	sort.Strings(keysSorted)
	for _, k := range keysSorted {
		env = append(env, k+"="+genv[k])
	}
	env = append(env, runlease.TokenVar("github")+"="+minted.Token)
	git := func(dir string, args ...string) (string, error) { return gittest.Run(dir, env, args...) }
	var seen []string // everything git printed, checked for the credential

	// K1: clone and push the repository the token may write.
	work := filepath.Join(gdir, "work")
	out, err := git("", "clone", "https://github.com/octo/hello", filepath.Join(work, "hello"))
	seen = append(seen, out)
	if err == nil {
		hello := filepath.Join(work, "hello")
		if err = os.WriteFile(filepath.Join(hello, "NOTES.md"), []byte("pushed through custody\n"), 0o644); err == nil {
			out2, e1 := git(hello, "add", "NOTES.md")
			out3, e2 := git(hello, "commit", "-qm", "notes from the agent")
			out4, e3 := git(hello, "push", "-q", "origin", "HEAD")
			seen = append(seen, out2, out3, out4)
			err = firstErr(e1, e2, e3)
			out = out4
		}
	}
	local, _ := git(filepath.Join(work, "hello"), "rev-parse", "HEAD")
	remote, _ := gittest.Run(filepath.Join(srv.Root, "octo/hello.git"), env, "rev-parse", "HEAD")
	g.line("K1", "git clone https://github.com/octo/hello, commit, git push: through the gateway, with the real credential injected",
		err == nil && strings.TrimSpace(local) != "" && strings.TrimSpace(local) == strings.TrimSpace(remote),
		fmt.Sprintf("pushed %.12s; the server's octo/hello is at %.12s", strings.TrimSpace(local), strings.TrimSpace(remote)),
		"want the push to land: "+strings.TrimSpace(out))

	// K2: push to a repository the token may only read.
	out, err = git("", "clone", "https://github.com/octo/site", filepath.Join(work, "site"))
	seen = append(seen, out)
	before, _ := gittest.Run(filepath.Join(srv.Root, "octo/site.git"), env, "rev-parse", "HEAD")
	var pushOut string
	if err == nil {
		site := filepath.Join(work, "site")
		_ = os.WriteFile(filepath.Join(site, "index.html"), []byte("defaced\n"), 0o644)
		git(site, "add", "index.html")
		git(site, "commit", "-qm", "deface")
		pushOut, err = git(site, "push", "-q", "origin", "HEAD")
		seen = append(seen, pushOut)
	}
	after, _ := gittest.Run(filepath.Join(srv.Root, "octo/site.git"), env, "rev-parse", "HEAD")
	g.line("K2", "git push to octo/site, which the token may only read: refused, nothing lands",
		err != nil && strings.Contains(pushOut, "token not valid for writing to repository octo/site") && before == after,
		lineWith(pushOut, "remote:"), "want git to fail with the gateway's refusal and the server's octo/site unchanged")

	// K3: a repository the token does not name at all.
	out, err = git("", "clone", "https://github.com/octo/private", filepath.Join(work, "private"))
	seen = append(seen, out)
	g.line("K3", "git clone of octo/private, not in the token: refused",
		err != nil && strings.Contains(out, "token not valid for repository octo/private"),
		lineWith(out, "remote:"), "want the gateway's refusal")

	// K4: the real credential: the server got it, git never did.
	authorized := 0
	for _, rq := range srv.Requests() {
		if rq.Authorized {
			authorized++
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(work, "hello", ".git", "config"))
	leaked := strings.Contains(strings.Join(seen, ""), demoGitCredential) || strings.Contains(string(cfg), demoGitCredential) ||
		strings.Contains(string(cfg), minted.Token)
	g.line("K4", "the server got the real credential on every forwarded request; git's output and .git/config hold neither it nor the token",
		authorized > 0 && authorized == len(srv.Requests()) && !leaked,
		fmt.Sprintf("%d requests at the git server, %d with the real credential; leaked: %v", len(srv.Requests()), authorized, leaked),
		"want the credential only between custody and the server")

	// K5: revoked, the same git fails.
	fixture.Do(ctx, http.MethodPost, c.AdminURL+"/v1/gateway/tokens/"+minted.JTI+"/revoke", c.AdminToken, nil)
	out, err = git(filepath.Join(work, "hello"), "fetch", "-q")
	g.line("K5", "the token revoked (as custody exec does at exit): git fetch refused",
		err != nil && strings.Contains(out, "gateway token revoked"), lineWith(out, "remote:"), "want the gateway's refusal")
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// lineWith is the first line of s holding sub, else s's first line.
func lineWith(s, sub string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return lines[0]
}
