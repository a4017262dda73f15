package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/gateway/gittest"
)

// githubReal is the real GitHub credential the test gateway holds.
const githubReal = "ghs_real-github-credential-0005"

// githubEnv is a gateway whose "github" provider points at a git smart
// HTTP server and a fake REST API on loopback, both accepting only
// githubReal.
type githubEnv struct {
	*env
	git  *gittest.Server
	rest *upstream
}

func newGitHubEnv(t *testing.T, mod ...func(*Options)) *githubEnv {
	t.Helper()
	gs := gittest.New(t, gitHubUser, githubReal)
	rest := newUpstream(t)
	rest.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+githubReal {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"full_name":"octo/hello","echo":"` + githubReal + `"}`))
	})
	e := newEnv(t, append([]func(*Options){func(o *Options) {
		o.Providers["github"] = ProviderConfig{BaseURL: rest.srv.URL, GitURL: gs.URL, AllowPaths: []string{"GET /meta"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "github"), []byte(githubReal+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}}, mod...)...)
	return &githubEnv{env: e, git: gs, rest: rest}
}

// gitClientEnv is the git client's environment: isolated (see
// gittest.Env), with a credential helper that hands git the gateway
// token from the environment, never from a file or argv.
func gitClientEnv(t *testing.T, token string) []string {
	return append(gittest.Env(t),
		"CUSTODY_TEST_GATEWAY_TOKEN="+token,
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=credential.helper",
		`GIT_CONFIG_VALUE_0=!f() { test "$1" = get && printf 'username=x\npassword=%s\n' "$CUSTODY_TEST_GATEWAY_TOKEN"; }; f`,
	)
}

// noRealCredential fails t if s holds the real credential in any form it
// is sent in.
func noRealCredential(t *testing.T, what, s string) {
	t.Helper()
	basic := base64.StdEncoding.EncodeToString([]byte(gitHubUser + ":" + githubReal))
	if strings.Contains(s, githubReal) || strings.Contains(s, basic) {
		t.Errorf("%s holds the real credential:\n%s", what, s)
	}
}

// TestGitThroughGateway runs the real git client against the gateway's
// github provider, in front of git http-backend that accepts only the
// real credential: a read token clones but cannot push, a write token
// pushes, a repository not in the token and a revoked token are refused,
// and the real credential reaches the upstream but nothing the client
// sees.
func TestGitThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git")
	}
	e := newGitHubEnv(t)
	hello := e.git.CreateBare(t, "octo/hello", "hello\n")
	e.git.CreateBare(t, "octo/other", "other\n")
	read := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{Repo: "octo/hello", Access: AccessRead}}, RunID: "r1"})
	write := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{Repo: "Octo/Hello", Access: AccessWrite}}})
	noRepos := e.mint(t, Grant{Providers: []string{"github"}})
	url := func(repo string) string { return e.data.URL + "/github/" + repo }
	var seen strings.Builder // everything git printed

	work := t.TempDir()
	readEnv := gitClientEnv(t, read.Token)
	out := gittest.Must(t, work, readEnv, "clone", url("octo/hello.git"), "ro")
	seen.WriteString(out)
	if b, err := os.ReadFile(filepath.Join(work, "ro", "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("cloned README = %q, %v; want hello", b, err)
	}
	// Without ".git", as "git clone https://github.com/o/r" asks.
	seen.WriteString(gittest.Must(t, work, readEnv, "clone", "--quiet", url("octo/hello"), "ro2"))

	t.Run("read token cannot push", func(t *testing.T) {
		before := gittest.Head(t, hello)
		gittest.Must(t, filepath.Join(work, "ro"), readEnv, "commit", "--quiet", "--allow-empty", "-m", "by a reader")
		out, err := gittest.Run(filepath.Join(work, "ro"), readEnv, "push", "origin", "main")
		seen.WriteString(out)
		// git shows a text/plain refusal as "remote: <text>", then the status.
		if err == nil || !strings.Contains(out, "remote: token not valid for writing to repository octo/hello\n") || !strings.Contains(out, "403") {
			t.Errorf("push with a read token = %v\n%s\nwant refused with 403", err, out)
		}
		if got := gittest.Head(t, hello); got != before {
			t.Errorf("bare main = %s after a refused push, want %s", got, before)
		}
	})

	t.Run("write token pushes", func(t *testing.T) {
		wEnv := gitClientEnv(t, write.Token)
		seen.WriteString(gittest.Must(t, work, wEnv, "clone", "--quiet", url("octo/hello.git"), "rw"))
		dir := filepath.Join(work, "rw")
		if err := os.WriteFile(filepath.Join(dir, "NEW"), []byte("pushed through the gateway\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Must(t, dir, wEnv, "add", "NEW")
		gittest.Must(t, dir, wEnv, "commit", "--quiet", "-m", "by a writer")
		out, err := gittest.Run(dir, wEnv, "push", "origin", "main")
		seen.WriteString(out)
		if err != nil {
			t.Fatalf("push with a write token: %v\n%s", err, out)
		}
		if got, want := gittest.Head(t, hello), strings.TrimSpace(gittest.Must(t, dir, wEnv, "rev-parse", "HEAD")); got != want {
			t.Errorf("bare main = %s after push, want %s", got, want)
		}
	})

	t.Run("large push", func(t *testing.T) {
		// Over git's http.postBuffer (1 MiB): a chunked request body, sent
		// after "Expect: 100-continue".
		wEnv := gitClientEnv(t, write.Token)
		dir := filepath.Join(work, "rw")
		big := make([]byte, 3<<20)
		if _, err := rand.Read(big); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "BIG"), big, 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Must(t, dir, wEnv, "add", "BIG")
		gittest.Must(t, dir, wEnv, "commit", "--quiet", "-m", "big")
		out, err := gittest.Run(dir, wEnv, "push", "origin", "main")
		seen.WriteString(out)
		if err != nil {
			t.Fatalf("large push: %v\n%s", err, out)
		}
		if got, want := gittest.Head(t, hello), strings.TrimSpace(gittest.Must(t, dir, wEnv, "rev-parse", "HEAD")); got != want {
			t.Errorf("bare main = %s after a large push, want %s", got, want)
		}
		seen.WriteString(gittest.Must(t, work, readEnv, "clone", "--quiet", url("octo/hello.git"), "big"))
		if b, err := os.ReadFile(filepath.Join(work, "big", "BIG")); err != nil || !bytes.Equal(b, big) {
			t.Errorf("cloned BIG differs from the pushed one (%v)", err)
		}
	})

	t.Run("repository not in the token", func(t *testing.T) {
		out, err := gittest.Run(work, readEnv, "clone", url("octo/other.git"), "other")
		seen.WriteString(out)
		if err == nil || !strings.Contains(out, "remote: token not valid for repository octo/other\n") {
			t.Errorf("clone of octo/other with a token for octo/hello = %v\n%s\nwant refused with 403", err, out)
		}
		code, _, body := e.do(t, "GET", "/github/octo/other.git/info/refs?service=git-upload-pack", map[string]string{"Authorization": "Bearer " + read.Token}, "")
		if code != http.StatusForbidden || body != "token not valid for repository octo/other\n" {
			t.Errorf("info/refs of octo/other = %d %q, want 403 token not valid for repository octo/other", code, body)
		}
	})

	t.Run("token without repos", func(t *testing.T) {
		out, err := gittest.Run(work, gitClientEnv(t, noRepos.Token), "clone", url("octo/hello.git"), "none")
		seen.WriteString(out)
		if err == nil || !strings.Contains(out, "403") {
			t.Errorf("clone with a token without repos = %v\n%s\nwant refused with 403", err, out)
		}
	})

	t.Run("revoked token", func(t *testing.T) {
		if err := e.g.Revoke(t.Context(), read.JTI); err != nil {
			t.Fatal(err)
		}
		out, err := gittest.Run(filepath.Join(work, "ro2"), readEnv, "fetch", "origin")
		seen.WriteString(out)
		if err == nil || !strings.Contains(out, "remote: gateway token revoked\n") || !strings.Contains(out, "Authentication failed") {
			t.Errorf("fetch with a revoked token = %v\n%s\nwant Authentication failed (401)", err, out)
		}
	})

	// The real credential reached the upstream (it answers nothing
	// without it) and nothing the client saw or kept holds it.
	var authorized int
	for _, r := range e.git.Requests() {
		if r.Authorized {
			authorized++
		}
	}
	if authorized == 0 {
		t.Errorf("the git server saw no request with the real credential: %+v", e.git.Requests())
	}
	noRealCredential(t, "git's output", seen.String())
	for _, d := range []string{"ro", "ro2", "rw"} {
		b, err := os.ReadFile(filepath.Join(work, d, ".git", "config"))
		if err != nil {
			t.Fatal(err)
		}
		noRealCredential(t, d+"/.git/config", string(b))
		if strings.Contains(string(b), read.Token) || strings.Contains(string(b), write.Token) {
			t.Errorf("%s/.git/config holds a gateway token:\n%s", d, b)
		}
	}
	noRealCredential(t, "the gateway's log", e.logs.String())
}
