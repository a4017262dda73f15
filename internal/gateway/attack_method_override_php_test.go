package gateway

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// phpVarName is the name PHP (and so Symfony's and Laravel's $request->query,
// built from $_GET) gives a query parameter named raw (already
// percent-decoded): leading spaces are dropped, every space and dot
// becomes "_", and a "[" with no closing "]" becomes "_" too (one with a
// "]" starts an array index and ends the name).
func phpVarName(raw string) string {
	n := strings.TrimLeft(raw, " ")
	var b strings.Builder
	for i := 0; i < len(n); i++ {
		switch c := n[i]; c {
		case ' ', '.':
			b.WriteByte('_')
		case '[':
			if strings.IndexByte(n[i:], ']') >= 0 {
				return b.String()
			}
			b.WriteByte('_')
			// PHP converts only this first "[" and keeps the rest as is.
			b.WriteString(n[i+1:])
			return b.String()
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func newMethodOverrideEnv(t *testing.T) (*env, *upstream, string) {
	t.Helper()
	up := newUpstream(t)
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: up.srv.URL,
			Auth: &ProviderAuth{Header: "X-Auth"}, AllowPaths: []string{"POST /items/*"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "acme"), []byte("acme-real-credential-9999\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	return e, up, e.mint(t, Grant{Providers: []string{"acme"}}).Token
}

// TestAttackMethodOverrideParamPHPNames: the gateway removes a "_method"
// query parameter (TestAttackMethodOverrideParam) because Symfony and
// Laravel take it as a POST's method. But they read it from PHP's $_GET,
// and PHP rewrites parameter names before the framework sees them: ".",
// " " and an unclosed "[" become "_", and leading spaces are dropped. So
// "?.method=DELETE", "?[method=DELETE" and "?+_method=DELETE" all arrive as
// $_GET["_method"] = "DELETE", and a token allowed only POST /items/*
// deletes the item.
func TestAttackMethodOverrideParamPHPNames(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	for _, q := range []string{".method=DELETE", "%5Bmethod=DELETE", "+_method=DELETE", "x=1&%2Emethod=PUT", "%20%20_method=DELETE"} {
		code, _, body := e.do(t, "POST", "/acme/items/5?"+q, bearer(tok), "{}")
		if code != 200 {
			continue // refused: fine
		}
		_ = body
		got := up.last(t).RawQuery
		v, _ := url.ParseQuery(got)
		for k := range v {
			if phpVarName(k) == "_method" {
				t.Errorf("POST ?%s reached the upstream with query %q: PHP reads parameter %q as _method=%s (a method override)", q, got, k, v.Get(k))
			}
		}
	}
}

// TestAttackMethodOverrideFormBody: Symfony (Request::getMethod reads
// $this->request->get('_method') before the query), Laravel and Rack's
// MethodOverride take "_method" from a POST's form body too, where the
// gateway never looks: a token allowed only POST /items/* sends
// "_method=DELETE" as an application/x-www-form-urlencoded body and the
// upstream deletes the item. The gateway strips the header and query
// forms of the override, so the body form is the same hole.
func TestAttackMethodOverrideFormBody(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	hdr := bearer(tok)
	hdr["Content-Type"] = "application/x-www-form-urlencoded"
	code, _, body := e.do(t, "POST", "/acme/items/5", hdr, "_method=DELETE")
	if code != 200 {
		return // refused: fine
	}
	_ = body
	last := up.last(t)
	v, _ := url.ParseQuery(string(last.Body))
	if m := v.Get("_method"); m != "" {
		t.Errorf("POST /acme/items/5 with form body %q reached the upstream unchanged (Content-Type %q): Symfony, Laravel and Rack take it as a %s",
			last.Body, last.Header.Get("Content-Type"), m)
	}
}

// TestAttackMethodOverrideHeaderUnderscore: the X-HTTP-Method-Override
// family is dropped by exact name (isMethodOverride), but a CGI/FastCGI
// front end names a header's variable by upper-casing it and turning "-"
// into "_" (Go's net/http/cgi, Caddy's php_fastcgi): "X_HTTP_Method_Override"
// becomes HTTP_X_HTTP_METHOD_OVERRIDE, the very variable Symfony's
// Request::getMethod reads. The underscore spelling reaches the upstream.
func TestAttackMethodOverrideHeaderUnderscore(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	for _, name := range []string{"X_HTTP_Method_Override", "X-HTTP_Method-Override", "X_Method_Override", "X_Http_Method"} {
		h := bearer(tok)
		h[name] = "DELETE"
		code, _, body := e.do(t, "POST", "/acme/items/5", h, "{}")
		if code != 200 {
			continue // refused: fine
		}
		_ = body
		for k := range up.last(t).Header {
			if isMethodOverride(strings.ReplaceAll(k, "_", "-")) {
				t.Errorf("header %q reached the upstream as %q: a CGI front end reads it as %s", name, k,
					"HTTP_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_")))
			}
		}
	}
}

// TestAttackPathOverrideHeaders: IIS URL Rewrite, Zend Framework 1 and
// older Symfony take X-Original-URL / X-Rewrite-URL as the request's path,
// over the request line's. The allow-list checks the request line's path
// only; these headers are forwarded, so a token allowed POST /items/* can
// ask such an upstream for any path.
func TestAttackPathOverrideHeaders(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	h := bearer(tok)
	h["X-Original-URL"] = "/admin/users/1/delete"
	h["X-Rewrite-URL"] = "/admin/users/1/delete"
	code, _, body := e.do(t, "POST", "/acme/items/5", h, "{}")
	if code != 200 {
		return // refused: fine
	}
	_ = body
	got := up.last(t).Header
	for _, k := range []string{"X-Original-Url", "X-Rewrite-Url"} {
		if v := got.Get(k); v != "" {
			t.Errorf("%s: %q reached the upstream: a path outside the allow-list (POST /items/*)", k, v)
		}
	}
}
