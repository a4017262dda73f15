package gateway

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProviderAuth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ProviderAuth
		ok   bool
	}{
		{"header:Authorization:Bearer", ProviderAuth{Header: "Authorization", Prefix: "Bearer "}, true},
		{"header:Authorization:Bearer ", ProviderAuth{Header: "Authorization", Prefix: "Bearer "}, true},
		{"header:Authorization:token=", ProviderAuth{Header: "Authorization", Prefix: "token="}, true},
		{"header:X-API-Key", ProviderAuth{Header: "X-API-Key"}, true},
		{"header:X-Token:Key:", ProviderAuth{Header: "X-Token", Prefix: "Key:"}, true},
		{"basic:api", ProviderAuth{BasicUser: "api"}, true},
		{"basic:", ProviderAuth{}, false},
		{"basic:a:b", ProviderAuth{}, false},
		{"header:", ProviderAuth{}, false},
		{"header:Bad Header", ProviderAuth{}, false},
		{"header:Host", ProviderAuth{}, false},
		{"header:content-length", ProviderAuth{}, false},
		{"header:Proxy-Authorization", ProviderAuth{}, false},
		{"header:X-Key:a\nb", ProviderAuth{}, false},
		{"bearer:x", ProviderAuth{}, false},
		{"", ProviderAuth{}, false},
	} {
		got, err := ParseProviderAuth(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseProviderAuth(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestBrokeredConfig: bad brokered providers refuse to start.
func TestBrokeredConfig(t *testing.T) {
	auth := &ProviderAuth{Header: "X-API-Key"}
	for _, tc := range []struct {
		name string
		cfg  ProviderConfig
		want string
	}{
		{"http without paths", ProviderConfig{Kind: KindHTTP, BaseURL: "https://api.example.com", Auth: auth}, "forwards only declared paths"},
		{"http without auth", ProviderConfig{Kind: KindHTTP, BaseURL: "https://api.example.com", AllowPaths: []string{"GET /x"}}, "needs Auth"},
		{"http with a bad header", ProviderConfig{Kind: KindHTTP, BaseURL: "https://api.example.com", AllowPaths: []string{"GET /x"},
			Auth: &ProviderAuth{Header: "Host"}}, "cannot carry a credential"},
		{"http without URL", ProviderConfig{Kind: KindHTTP, Auth: auth, AllowPaths: []string{"GET /x"}}, "BaseURL"},
		{"github with auth", ProviderConfig{Kind: KindGitHub, BaseURL: "https://ghe.example.com/api/v3", Auth: auth}, "takes no Auth"},
		{"github with a bad git URL", ProviderConfig{Kind: KindGitHub, BaseURL: "https://ghe.example.com/api/v3", GitURL: "ftp://x"}, "GitURL"},
		{"openai with a git URL", ProviderConfig{Kind: KindOpenAI, BaseURL: "https://x.example.com", GitURL: "https://x.example.com"}, "Auth and GitURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildProviders(map[string]ProviderConfig{"p": tc.cfg})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("buildProviders(%+v) = %v, want an error with %q", tc.cfg, err, tc.want)
			}
		})
	}
	ps, err := buildProviders(map[string]ProviderConfig{"ghe": {Kind: KindGitHub, BaseURL: DefaultGitHubAPIURL}})
	if err != nil || ps["ghe"].git.String() != DefaultGitHubGitURL || ps["github"].base.String() != DefaultGitHubAPIURL {
		t.Errorf("buildProviders(github kind) = %v; want the default git URL", err)
	}
}

// TestHTTPProvider: providers of kind http get the real credential where
// declared (a header with or without a prefix, or Basic auth), forward
// only the declared method and path patterns, take the gateway token as
// a Bearer token, an API key header or a Basic password, and scrub the
// credential from responses in every form it was sent.
func TestHTTPProvider(t *testing.T) {
	const (
		bearerKey = "real-bearer-credential-1111"
		headerKey = "real-header-credential-2222"
		basicKey  = "real-basic-credential-3333"
	)
	ups := map[string]*upstream{"acme": newUpstream(t), "keyed": newUpstream(t), "basic": newUpstream(t)}
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: ups["acme"].srv.URL + "/api",
			Auth: &ProviderAuth{Header: "Authorization", Prefix: "Bearer "}, AllowPaths: []string{"GET /items/*", "POST /items"}}
		o.Providers["keyed"] = ProviderConfig{Kind: KindHTTP, BaseURL: ups["keyed"].srv.URL,
			Auth: &ProviderAuth{Header: "X-Auth-Token"}, AllowPaths: []string{"/v2/**"}}
		o.Providers["basic"] = ProviderConfig{Kind: KindHTTP, BaseURL: ups["basic"].srv.URL,
			Auth: &ProviderAuth{BasicUser: "api"}, AllowPaths: []string{"GET /status"}}
		for name, k := range map[string]string{"acme": bearerKey, "keyed": headerKey, "basic": basicKey} {
			if err := os.WriteFile(filepath.Join(o.KeysDir, name), []byte(k+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	})
	basicB64 := base64.StdEncoding.EncodeToString([]byte("api:" + basicKey))
	// Each upstream echoes the credential it got, in the form it got it.
	for _, u := range ups {
		u.setHandler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
			w.Write([]byte(r.Header.Get("Authorization") + " " + r.Header.Get("X-Auth-Token") + "\n"))
		})
	}
	tok := e.mint(t, Grant{Providers: []string{"acme", "keyed", "basic"}, Models: []string{"irrelevant"}}).Token
	openaiOnly := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	basicAuth := func(user, tok string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+tok))}
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		code               int
		body               string
		up                 string // the upstream it reaches
		wantHeader         string // ... and the credential header there
		wantValue          string
	}{
		{"bearer header", "GET", "/acme/items/42", bearer(tok), 200, "", "acme", "Authorization", "Bearer " + bearerKey},
		{"basic password", "POST", "/acme/items", basicAuth("ignored", tok), 200, "", "acme", "Authorization", "Bearer " + bearerKey},
		{"x-api-key", "GET", "/keyed/v2/a/b", map[string]string{"X-Api-Key": tok}, 200, "", "keyed", "X-Auth-Token", headerKey},
		{"client's own header replaced", "GET", "/keyed/v2/a", map[string]string{"X-Api-Key": tok, "X-Auth-Token": "client-value"}, 200, "", "keyed", "X-Auth-Token", headerKey},
		{"basic injection", "GET", "/basic/status", bearer(tok), 200, "", "basic", "Authorization", "Basic " + basicB64},
		{"method not declared", "DELETE", "/acme/items/42", bearer(tok), 403, "path not allowed for provider acme: items\n", "", "", ""},
		{"path not declared", "GET", "/acme/admin/users", bearer(tok), 403, "path not allowed for provider acme: admin\n", "", "", ""},
		{"wildcard is one segment", "GET", "/acme/items/42/secrets", bearer(tok), 403, "path not allowed for provider acme: items\n", "", "", ""},
		{"provider not in the token", "GET", "/acme/items/1", bearer(openaiOnly), 403, "token not valid for provider acme\n", "", "", ""},
		{"no token", "GET", "/acme/items/1", nil, 401, "missing gateway token\n", "", "", ""},
		{"empty basic password", "GET", "/acme/items/1", basicAuth("x", ""), 401, "missing gateway token\n", "", "", ""},
		{"bad basic", "GET", "/acme/items/1", map[string]string{"Authorization": "Basic !!!"}, 401, "missing gateway token\n", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]int{}
			for n, u := range ups {
				before[n] = len(u.requests())
			}
			code, h, body := e.do(t, tc.method, tc.path, tc.hdr, "")
			if code != tc.code || (tc.body != "" && body != tc.body) {
				t.Fatalf("%s %s = %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.body)
			}
			for n, u := range ups {
				if reached := len(u.requests()) > before[n]; reached != (n == tc.up) {
					t.Errorf("upstream %s reached = %v", n, reached)
				}
			}
			if tc.up == "" {
				return
			}
			got := ups[tc.up].last(t)
			if v := got.Header.Values(tc.wantHeader); len(v) != 1 || v[0] != tc.wantValue {
				t.Errorf("upstream %s = %q, want %q", tc.wantHeader, v, tc.wantValue)
			}
			for _, k := range []string{"X-Api-Key", "X-Goog-Api-Key", "Api-Key"} {
				if v := got.Header.Get(k); v != "" {
					t.Errorf("upstream got %s: %q", k, v)
				}
			}
			if tc.up == "acme" && !strings.HasPrefix(got.Path, "/api/items") {
				t.Errorf("upstream path = %q, want under the base URL's /api", got.Path)
			}
			for _, secret := range []string{bearerKey, headerKey, basicKey, basicB64} {
				if strings.Contains(body, secret) || strings.Contains(h.Get("X-Echo"), secret) {
					t.Errorf("response holds a real credential: %q %q", body, h.Get("X-Echo"))
				}
			}
			if !strings.Contains(body, redacted) {
				t.Errorf("body = %q, want the echoed credential redacted", body)
			}
		})
	}
}
