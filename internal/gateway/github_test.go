package gateway

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestClassifyGitHub(t *testing.T) {
	for _, tc := range []struct {
		method, path, query string
		want                githubRoute
	}{
		{"GET", "/octo/hello.git/info/refs", "service=git-upload-pack",
			githubRoute{git: true, allowed: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"GET", "/octo/hello/info/refs", "service=git-upload-pack",
			githubRoute{git: true, allowed: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"GET", "/octo/hello.git/info/refs", "service=git-receive-pack",
			githubRoute{git: true, allowed: true, repo: "octo/hello", validRepo: true, write: true, class: "git"}},
		{"POST", "/octo/hello.git/git-upload-pack", "",
			githubRoute{git: true, allowed: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"POST", "/Octo/Hello.git/git-receive-pack", "",
			githubRoute{git: true, allowed: true, repo: "Octo/Hello", validRepo: true, write: true, class: "git"}},
		// The dumb protocol, another service, two services, a wrong method.
		{"GET", "/octo/hello.git/info/refs", "",
			githubRoute{git: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"GET", "/octo/hello.git/info/refs", "service=git-upload-archive",
			githubRoute{git: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"GET", "/octo/hello.git/info/refs", "service=git-upload-pack&service=git-receive-pack",
			githubRoute{git: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"POST", "/octo/hello.git/info/refs", "service=git-upload-pack",
			githubRoute{git: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"GET", "/octo/hello.git/git-upload-pack", "",
			githubRoute{git: true, repo: "octo/hello", validRepo: true, class: "git"}},
		{"POST", "/-bad/hello.git/git-upload-pack", "",
			githubRoute{git: true, allowed: true, repo: "-bad/hello", class: "git"}},
		{"POST", "/octo/..git/git-upload-pack", "",
			githubRoute{git: true, allowed: true, repo: "octo/.", class: "git"}},
		// REST.
		{"GET", "/repos/octo/hello", "", githubRoute{repo: "octo/hello", validRepo: true, class: "repos"}},
		{"GET", "/repos/octo/hello/issues/1", "", githubRoute{repo: "octo/hello", validRepo: true, class: "issues"}},
		{"POST", "/repos/octo/hello/issues", "", githubRoute{repo: "octo/hello", validRepo: true, write: true, class: "issues"}},
		{"DELETE", "/repos/octo/hello", "", githubRoute{repo: "octo/hello", validRepo: true, write: true, class: "repos"}},
		{"GET", "/repos/octo/hello.git/info/refs", "service=git-upload-pack", githubRoute{repo: "octo/hello.git", class: "info"}},
		{"GET", "/user", "", githubRoute{class: "user"}},
		{"POST", "/graphql", "", githubRoute{write: true, class: "graphql"}},
		{"GET", "/repos/octo", "", githubRoute{class: "repos"}},
		{"GET", "/octo/hello/blob/main/README", "", githubRoute{class: "octo"}},
	} {
		got := classifyGitHub(tc.method, tc.path, tc.query)
		if got != tc.want {
			t.Errorf("classifyGitHub(%s, %s, %q) = %+v, want %+v", tc.method, tc.path, tc.query, got, tc.want)
		}
	}
}

func TestCheckRepoGrants(t *testing.T) {
	r := func(repo, access string) RepoGrant { return RepoGrant{Repo: repo, Access: access} }
	many := make([]RepoGrant, MaxRepos+1)
	for i := range many {
		many[i] = r("octo/r"+strings.Repeat("x", i+1), AccessRead)
	}
	for _, tc := range []struct {
		name   string
		grants []RepoGrant
		ok     bool
	}{
		{"none", nil, true},
		{"read and write", []RepoGrant{r("octo/hello", "read"), r("octo-2/site.io", "write"), r("a/_b-c.d", "read")}, true},
		{"max", many[:MaxRepos], true},
		{"too many", many, false},
		{"no owner", []RepoGrant{r("hello", "read")}, false},
		{"empty name", []RepoGrant{r("octo/", "read")}, false},
		{"three parts", []RepoGrant{r("octo/hello/x", "read")}, false},
		{"dot", []RepoGrant{r("octo/.", "read")}, false},
		{"dot dot", []RepoGrant{r("octo/..", "read")}, false},
		{".git", []RepoGrant{r("octo/hello.git", "read")}, false},
		{"owner starts with -", []RepoGrant{r("-octo/hello", "read")}, false},
		{"owner too long", []RepoGrant{r(strings.Repeat("o", 40)+"/hello", "read")}, false},
		{"space", []RepoGrant{r("octo/hel lo", "read")}, false},
		{"percent", []RepoGrant{r("octo/hel%6co", "read")}, false},
		{"admin", []RepoGrant{r("octo/hello", "admin")}, false},
		{"no access", []RepoGrant{r("octo/hello", "")}, false},
		{"twice, other case", []RepoGrant{r("octo/hello", "read"), r("Octo/Hello", "write")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckRepoGrants(tc.grants); (err == nil) != tc.ok {
				t.Errorf("CheckRepoGrants(%v) = %v, want ok %v", tc.grants, err, tc.ok)
			}
		})
	}
}

func TestSameRepos(t *testing.T) {
	a := []RepoGrant{{"octo/hello", "read"}, {"octo/site", "write"}}
	for _, tc := range []struct {
		b    []RepoGrant
		want bool
	}{
		{[]RepoGrant{{"octo/site", "write"}, {"Octo/Hello", "read"}}, true},
		{[]RepoGrant{{"octo/hello", "write"}, {"octo/site", "write"}}, false},
		{[]RepoGrant{{"octo/hello", "read"}}, false},
		{[]RepoGrant{{"octo/hello", "read"}, {"octo/site", "write"}, {"octo/more", "read"}}, false},
		{[]RepoGrant{{"octo/hello", "read"}, {"octo/hello", "read"}, {"octo/site", "write"}}, false},
	} {
		if got := sameRepos(a, tc.b); got != tc.want {
			t.Errorf("sameRepos(%v, %v) = %v, want %v", a, tc.b, got, tc.want)
		}
	}
	if !sameRepos(nil, []RepoGrant{}) {
		t.Error("sameRepos(nil, []) = false, want true (both none)")
	}
}

// TestGitHubREST: REST requests go to the API upstream with the real
// credential as a Bearer token, admitted by the token's repos and
// access: read for GET, write for the rest, only under /repos/OWNER/NAME
// and only the default endpoints.
func TestGitHubREST(t *testing.T) {
	e := newGitHubEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{"octo/hello", AccessRead}, {"octo/site", AccessWrite}}}).Token
	noRepos := e.mint(t, Grant{Providers: []string{"github"}}).Token
	basic := func(tok string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:"+tok))}
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		code               int
		body               string // the refusal, for a refused request
	}{
		{"read a readable repository", "GET", "/github/repos/octo/hello", bearer(tok), 200, ""},
		{"read with a Basic password", "GET", "/github/repos/octo/hello/pulls", basic(tok), 200, ""},
		{"owner and name in another case", "GET", "/github/repos/OCTO/Hello/issues", bearer(tok), 200, ""},
		{"write to a writable repository", "POST", "/github/repos/octo/site/issues", bearer(tok), 200, ""},
		{"write to a readable one", "POST", "/github/repos/octo/hello/issues", bearer(tok), 403,
			"token not valid for writing to repository octo/hello\n"},
		{"a repository not granted", "GET", "/github/repos/octo/other", bearer(tok), 403,
			"token not valid for repository octo/other\n"},
		{"no repos", "GET", "/github/repos/octo/hello", bearer(noRepos), 403,
			"token not valid for repository octo/hello\n"},
		{"delete the repository", "DELETE", "/github/repos/octo/site", bearer(tok), 403,
			"path not allowed for provider github: repos\n"},
		{"add a deploy key", "POST", "/github/repos/octo/site/keys", bearer(tok), 403,
			"path not allowed for provider github: keys\n"},
		{"add a collaborator", "PUT", "/github/repos/octo/site/collaborators/mallory", bearer(tok), 403,
			"path not allowed for provider github: collaborators\n"},
		{"the user", "GET", "/github/user", bearer(tok), 403, "path not allowed for provider github: user\n"},
		{"an allowed path naming no repository", "GET", "/github/meta", bearer(tok), 403,
			"token not valid for repository (none)\n"},
		{"an invalid repository name", "GET", "/github/repos/octo/hello.git", bearer(tok), 403,
			"token not valid for repository (invalid name)\n"},
		{"graphql", "POST", "/github/graphql", bearer(tok), 403, "path not allowed for provider github: graphql\n"},
		{"an organization", "GET", "/github/orgs/octo/repos", bearer(tok), 403, "path not allowed for provider github: orgs\n"},
		{"no token", "GET", "/github/repos/octo/hello", nil, 401, "missing gateway token\n"},
		{"two tokens", "GET", "/github/repos/octo/hello", map[string]string{"Authorization": "Basic " +
			base64.StdEncoding.EncodeToString([]byte("x:"+tok)), "X-Api-Key": noRepos}, 401, "invalid gateway token: conflicting tokens\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.rest.requests())
			code, h, body := e.do(t, tc.method, tc.path, tc.hdr, "")
			if code != tc.code || (tc.body != "" && body != tc.body) {
				t.Fatalf("%s %s = %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.body)
			}
			reached := len(e.rest.requests()) > before
			if reached != (tc.code == 200) {
				t.Errorf("upstream reached = %v, want %v", reached, tc.code == 200)
			}
			if tc.code == 200 {
				// The upstream answers only the real credential, and
				// echoes it: the client gets it redacted.
				if strings.Contains(body, githubReal) || !strings.Contains(body, redacted) {
					t.Errorf("body = %q, want the credential redacted", body)
				}
				if got := e.rest.last(t).Header.Get("Authorization"); got != "Bearer "+githubReal {
					t.Errorf("upstream Authorization = %q, want the real credential", got)
				}
			}
			if code == 401 && !strings.Contains(strings.Join(h.Values("WWW-Authenticate"), ","), "Basic") {
				t.Errorf("401 WWW-Authenticate = %q, want a Basic challenge", h.Values("WWW-Authenticate"))
			}
		})
	}
}

// TestGitHubReposForged: with the signing key leaked, a minted token's
// claims with more repositories or more access are refused.
func TestGitHubReposForged(t *testing.T) {
	e := newGitHubEnv(t)
	real := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{"octo/hello", AccessRead}}})
	forge := func(repos []RepoGrant) string {
		c := *real.Claims
		c.Repos = repos
		return signRaw(t, jwt.SigningMethodEdDSA, e.key, KeyID(e.key.Public().(ed25519.PublicKey)), &c)
	}
	for name, repos := range map[string][]RepoGrant{
		"write":           {{"octo/hello", AccessWrite}},
		"more":            {{"octo/hello", AccessRead}, {"octo/other", AccessRead}},
		"another":         {{"octo/other", AccessRead}},
		"none (no scope)": nil,
	} {
		code, _, body := e.do(t, "GET", "/github/repos/octo/hello", bearer(forge(repos)), "")
		if code != 401 || body != "invalid gateway token: not minted by this gateway\n" {
			t.Errorf("%s: forged repos = %d %q, want 401 not minted", name, code, body)
		}
	}
	// The same claims, re-signed, are the minted token's.
	if code, _, body := e.do(t, "GET", "/github/repos/Octo/Hello", bearer(forge([]RepoGrant{{"OCTO/hello", AccessRead}})), ""); code != 200 {
		t.Errorf("re-signed claims, repo in another case = %d %q, want 200", code, body)
	}
}

// TestMintRepos: the admin plane takes repos, checks them and echoes
// them; Mint refuses repos without a github provider.
func TestMintRepos(t *testing.T) {
	e := newGitHubEnv(t)
	m := e.mintHTTP(t, `{"providers":["github"],"repos":[{"repo":"octo/hello","access":"read"},{"repo":"octo/site","access":"write"}]}`)
	if len(m.Repos) != 2 || m.Repos[1] != (RepoGrant{"octo/site", AccessWrite}) {
		t.Errorf("MintResponse.Repos = %v", m.Repos)
	}
	if code, _, body := e.do(t, "POST", "/github/repos/octo/site/pulls", bearer(m.Token), "{}"); code != 200 {
		t.Errorf("write with the minted token = %d %q", code, body)
	}
	for _, body := range []string{
		`{"providers":["github"],"repos":[{"repo":"octo","access":"read"}]}`,
		`{"providers":["github"],"repos":[{"repo":"octo/hello","access":"admin"}]}`,
		`{"providers":["github"],"repos":[{"repo":"octo/hello","access":"read","extra":1}]}`,
		`{"providers":["openai"],"repos":[{"repo":"octo/hello","access":"read"}]}`,
	} {
		if code, b := e.adminPost(t, "/v1/gateway/tokens", body); code != http.StatusBadRequest {
			t.Errorf("POST %s = %d %s, want 400", body, code, b)
		}
	}
}

// TestGitHubRecorded: a run's github requests are recorded with the
// path class "git" for git smart HTTP and the REST endpoint's class, not
// the repository's owner.
func TestGitHubRecorded(t *testing.T) {
	log := &callLog{}
	e := newGitHubEnv(t, func(o *Options) { o.Recorder = log })
	e.git.CreateBare(t, "octo/hello", "hello\n")
	tok := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{"octo/hello", AccessRead}}, RunID: "r1"}).Token
	for _, path := range []string{"/github/octo/hello.git/info/refs?service=git-upload-pack", "/github/repos/octo/hello/issues"} {
		if code, _, body := e.do(t, "GET", path, bearer(tok), ""); code != 200 {
			t.Fatalf("GET %s = %d %q", path, code, body)
		}
	}
	eventually(t, "two recorded calls", func() bool { return len(log.all()) == 2 })
	if c := log.all(); c[0].PathClass != "git" || c[1].PathClass != "issues" || c[0].Provider != "github" {
		t.Errorf("recorded path classes = %q, %q; want git, issues", c[0].PathClass, c[1].PathClass)
	}
}
