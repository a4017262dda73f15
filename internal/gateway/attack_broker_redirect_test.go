package gateway

import (
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackUpstreamRedirect: an upstream's redirect to itself (GitHub
// answers a renamed repository with 301 to /repositories/ID, its git
// server to the new name) must not hand the client the upstream's URL,
// which a client follows around the gateway, with the gateway token in
// its Authorization when the host name is the same (Go's client ignores
// the port): the Location is taken back under /{provider}, so that the
// client follows it through the gateway and its checks.
func TestAttackUpstreamRedirect(t *testing.T) {
	e := newGitHubEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{"octo/hello", AccessRead}}}).Token
	noFollow := *e.client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e.client = &noFollow
	for _, tc := range []struct{ loc, want string }{
		{e.rest.srv.URL + "/repositories/1?page=2", "/github/repositories/1?page=2"},
		{"/repos/octo/new", "/github/repos/octo/new"},
		{"https://127.0.0.1:1/repos/octo/hello?x=1#f", "/github/repos/octo/hello?x=1#f"},
		{"https://codeload.github.com/octo/hello/legacy.tar.gz/main", "https://codeload.github.com/octo/hello/legacy.tar.gz/main"},
	} {
		e.rest.setHandler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", tc.loc)
			w.WriteHeader(http.StatusMovedPermanently)
		})
		code, h, _ := e.do(t, "GET", "/github/repos/octo/hello", bearer(tok), "")
		if code != http.StatusMovedPermanently || h.Get("Location") != tc.want {
			t.Errorf("upstream Location %q: client got %d Location %q, want %q", tc.loc, code, h.Get("Location"), tc.want)
		}
		if strings.Contains(h.Get("Location"), e.rest.srv.Listener.Addr().String()) {
			t.Errorf("Location %q holds the upstream's address", h.Get("Location"))
		}
	}
}

// TestAttackUpstreamRedirectBasePath: for an upstream under a base path,
// a Location under it is taken back under /{provider}; one elsewhere on
// the upstream's host is dropped.
func TestAttackUpstreamRedirectBasePath(t *testing.T) {
	up := newUpstream(t)
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: up.srv.URL + "/api",
			Auth: &ProviderAuth{Header: "X-Auth"}, AllowPaths: []string{"GET /items/*"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "acme"), []byte("acme-real-credential-9999\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	tok := e.mint(t, Grant{Providers: []string{"acme"}}).Token
	noFollow := *e.client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e.client = &noFollow
	for loc, want := range map[string]string{
		up.srv.URL + "/api/items/2": "/acme/items/2",
		"3":                         "/acme/items/3",
		"/internal/admin":           "",
	} {
		up.setHandler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusFound)
		})
		code, h, _ := e.do(t, "GET", "/acme/items/1", bearer(tok), "")
		if code != http.StatusFound || h.Get("Location") != want {
			t.Errorf("upstream Location %q: client got %d Location %q, want %q", loc, code, h.Get("Location"), want)
		}
	}
}

// TestAttackUpstreamLink: GitHub's pagination Link header names the
// upstream (https://api.github.com/repositories/ID/issues?page=2), and
// clients (octokit's paginate) request it as is, with the gateway token,
// around the gateway: its targets on the upstream are taken back under
// /{provider} like a Location, and a Link naming the upstream's host
// outside its base path is dropped.
func TestAttackUpstreamLink(t *testing.T) {
	e := newGitHubEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{"octo/hello", AccessRead}}}).Token
	up := e.rest.srv.URL
	for link, want := range map[string]string{
		`<` + up + `/repositories/1/issues?page=2>; rel="next", <` + up + `/repositories/1/issues?page=5>; rel="last"`: `</github/repositories/1/issues?page=2>; rel="next", </github/repositories/1/issues?page=5>; rel="last"`,
		`<https://docs.github.com/rest>; rel="help"`: `<https://docs.github.com/rest>; rel="help"`,
	} {
		e.rest.setHandler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", link)
			w.Write([]byte("[]"))
		})
		code, h, _ := e.do(t, "GET", "/github/repos/octo/hello/issues", bearer(tok), "")
		if code != 200 || h.Get("Link") != want {
			t.Errorf("upstream Link %q: client got %d Link %q, want %q", link, code, h.Get("Link"), want)
		}
	}
}

// TestAttackUpstreamEarlyHintsLink: a 103 Early Hints goes to the client
// before the response, past ModifyResponse: its Link targets on the
// upstream are taken back under /{provider} too.
func TestAttackUpstreamEarlyHintsLink(t *testing.T) {
	e := newGitHubEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"github"}, Repos: []RepoGrant{{"octo/hello", AccessRead}}}).Token
	e.rest.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "<"+e.rest.srv.URL+"/repos/octo/hello/x.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Write([]byte("{}"))
	})
	var got []string
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
			got = append(got, h.Values("Link")...)
			return nil
		},
	}), "GET", e.data.URL+"/github/repos/octo/hello", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 1 || got[0] != "</github/repos/octo/hello/x.css>; rel=preload" {
		t.Errorf("103 Link = %q, want it under /github", got)
	}
}
