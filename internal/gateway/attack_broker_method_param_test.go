package gateway

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestAttackMethodOverrideParam: Symfony and Laravel take a POST's
// "_method" query parameter as its method (POST /items/5?_method=DELETE
// is a DELETE), like the X-HTTP-Method-Override header the gateway
// already drops: a kind http provider that declares only POST must not
// forward a DELETE that way. The parameter is removed, in any encoding of
// its name.
func TestAttackMethodOverrideParam(t *testing.T) {
	up := newUpstream(t)
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: up.srv.URL,
			Auth: &ProviderAuth{Header: "X-Auth"}, AllowPaths: []string{"POST /items/*"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "acme"), []byte("acme-real-credential-9999\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	tok := e.mint(t, Grant{Providers: []string{"acme"}}).Token
	for _, q := range []string{"_method=DELETE&x=1", "x=1&%5Fmethod=DELETE", "_method=PUT"} {
		code, _, body := e.do(t, "POST", "/acme/items/5?"+q, bearer(tok), "{}")
		if code != 200 {
			t.Fatalf("POST ?%s = %d %q", q, code, body)
		}
		v, _ := url.ParseQuery(up.last(t).RawQuery)
		if _, ok := v["_method"]; ok {
			t.Errorf("POST ?%s reached the upstream with query %q: a method override", q, up.last(t).RawQuery)
		}
	}
}
