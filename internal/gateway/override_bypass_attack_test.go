package gateway

import (
	"net/http"
	"testing"
)

// TestAttackOverrideNULTruncatedName: PHP registers a request variable by
// its C string name (php_register_variable_ex: var_len = strlen(var)), so
// a decoded name "_method\x00anything" is $_POST["_method"] /
// $_GET["_method"]. isMethodOverrideParam compares the whole Go string,
// so "_method%00=DELETE" passes both the query drop and the form-body
// check, and a token allowed only POST /items/* deletes the item on a
// Symfony/Laravel upstream.
func TestAttackOverrideNULTruncatedName(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	hdr := bearer(tok)
	hdr["Content-Type"] = "application/x-www-form-urlencoded"
	if code, _, _ := e.do(t, "POST", "/acme/items/5", hdr, "_method%00=DELETE"); code == http.StatusOK {
		t.Errorf("form body %q forwarded (%d; upstream got %q): PHP reads it as _method=DELETE", "_method%00=DELETE", code, up.last(t).Body)
	}
	if code, _, _ := e.do(t, "POST", "/acme/items/5?_method%00x=DELETE", bearer(tok), "{}"); code == http.StatusOK {
		if q := up.last(t).RawQuery; q != "" {
			t.Errorf("query %q reached the upstream as %q: PHP reads it as $_GET[_method]=DELETE", "_method%00x=DELETE", q)
		}
	}
}

// TestAttackOverrideContentTypeListed: checkFormOverride takes the media
// type from mime.ParseMediaType, which fails (mt "") on a Content-Type
// PHP and Rack still read as a form: PHP's SAPI lower-cases it and cuts
// it at the first ';', ',' or ' '; Rack splits it on /\s*[;,]\s*/. A
// parameter repeated ("; a=1; a=2") also fails Go's parse. The body is
// then not looked at, so "_method=DELETE" (and a multipart form) is
// forwarded.
func TestAttackOverrideContentTypeListed(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	for _, ct := range []string{
		"application/x-www-form-urlencoded,text/plain",
		"application/x-www-form-urlencoded text/plain",
		"application/x-www-form-urlencoded; charset=utf-8; charset=utf-8",
	} {
		hdr := bearer(tok)
		hdr["Content-Type"] = ct
		if code, _, _ := e.do(t, "POST", "/acme/items/5", hdr, "_method=DELETE"); code == http.StatusOK {
			t.Errorf("Content-Type %q, body _method=DELETE: forwarded (upstream got %q): PHP/Rack parse it as a form", ct, up.last(t).Body)
		}
	}
	hdr := bearer(tok)
	hdr["Content-Type"] = "multipart/form-data; boundary=x, text/plain"
	if code, _, _ := e.do(t, "POST", "/acme/items/5", hdr, "--x\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--x--\r\n"); code == http.StatusOK {
		t.Errorf("multipart form with a listed Content-Type %q forwarded: PHP parses it (boundary taken from the header)", hdr["Content-Type"])
	}
}

// TestAttackOverrideRackBracketNames: Rack 2's QueryParser.normalize_params
// matches a name with /\A[\[\]]*([^\[\]]+)\]*/ and, when nothing follows,
// stores params[$1]: "[_method]", "]_method" and "_method]" are all
// req.POST["_method"], which Rack::MethodOverride takes as the method.
// isMethodOverrideParam reads names only as PHP does.
func TestAttackOverrideRackBracketNames(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	for _, body := range []string{"%5B_method%5D=DELETE", "_method%5D=DELETE", "%5D_method=DELETE"} {
		hdr := bearer(tok)
		hdr["Content-Type"] = "application/x-www-form-urlencoded"
		if code, _, _ := e.do(t, "POST", "/acme/items/5", hdr, body); code == http.StatusOK {
			t.Errorf("form body %q forwarded (upstream got %q): Rack 2 reads it as _method=DELETE", body, up.last(t).Body)
		}
	}
}

// TestAttackOverrideLaravelJSONBody: Laravel's Request::createFromBase
// replaces the request bag with the decoded JSON body for a JSON request,
// and Symfony's getMethod (override enabled by Laravel's kernel) reads
// $this->request->get('_method'): a POST with {"_method":"DELETE"} is a
// DELETE. checkFormOverride looks only at urlencoded forms.
func TestAttackOverrideLaravelJSONBody(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	hdr := bearer(tok)
	hdr["Content-Type"] = "application/json"
	if code, _, _ := e.do(t, "POST", "/acme/items/5", hdr, `{"_method":"DELETE"}`); code == http.StatusOK {
		t.Errorf("JSON body {\"_method\":\"DELETE\"} forwarded (upstream got %q): Laravel takes it as a DELETE", up.last(t).Body)
	}
}
