package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// A request may ask the server behind the gateway to take it as another
// method or path than the one the gateway checked (the path allow-list
// checks the request's own method and path). None of these ways is
// forwarded.

// methodOverrideHeaders ask a server to take a request as another method
// (Google's front end honours X-HTTP-Method-Override on a POST);
// pathOverrideHeaders as another path (IIS URL Rewrite, Zend Framework 1
// and older Symfony read X-Original-URL and X-Rewrite-URL). A name is
// compared ignoring letter case and with '_' read as '-': CGI and FastCGI
// front ends (Go's net/http/cgi, Caddy, PHP-FPM) pass X_HTTP_Method_Override
// on as HTTP_X_HTTP_METHOD_OVERRIDE, the same variable as the dashed name.
var (
	methodOverrideHeaders = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}
	pathOverrideHeaders   = [...]string{"X-Original-Url", "X-Rewrite-Url"}
)

// isMethodOverride reports whether header name k is one of
// methodOverrideHeaders or pathOverrideHeaders, ignoring letter case and
// reading '_' as '-'.
func isMethodOverride(k string) bool {
	k = strings.ReplaceAll(k, "_", "-")
	for _, h := range methodOverrideHeaders {
		if strings.EqualFold(k, h) {
			return true
		}
	}
	for _, h := range pathOverrideHeaders {
		if strings.EqualFold(k, h) {
			return true
		}
	}
	return false
}

// methodOverrideParam is the parameter Symfony, Laravel and Rack take as
// a POST's method (POST /items/5?_method=DELETE is a DELETE), from the
// query or a form body.
const methodOverrideParam = "_method"

// isMethodOverrideParam reports whether parameter name n (decoded) may
// be read as methodOverrideParam, ignoring letter case: by PHP into
// $_GET and $_POST (the name cut at a NUL byte, leading spaces dropped,
// then ' ', '.' and the first '[' that no ']' closes read as '_'), or
// by Rack (brackets around and inside the name dropped).
func isMethodOverrideParam(n string) bool {
	if i := strings.IndexByte(n, 0); i >= 0 {
		n = n[:i]
	}
	n = strings.TrimLeft(n, " ")
	var php strings.Builder
	bracket := false
	for i := 0; i < len(n); i++ {
		switch c := n[i]; {
		case c == ' ' || c == '.':
			php.WriteByte('_')
		case c == '[' && !bracket:
			bracket = true
			if !strings.Contains(n[i:], "]") {
				php.WriteByte('_')
			} else {
				php.WriteByte(c)
			}
		default:
			php.WriteByte(c)
		}
	}
	rack := strings.NewReplacer("[", "", "]", "").Replace(php.String())
	return strings.EqualFold(php.String(), methodOverrideParam) || strings.EqualFold(rack, methodOverrideParam)
}

// mayHoldMethodOverride reports whether raw query q may name
// methodOverrideParam in any spelling (a cheap test before parsing).
func mayHoldMethodOverride(q string) bool {
	return strings.Contains(strings.ToLower(q), "method")
}

// dropMethodOverrides deletes from v every parameter isMethodOverrideParam
// matches and reports whether there was one.
func dropMethodOverrides(v url.Values) bool {
	found := false
	for n := range v {
		if isMethodOverrideParam(n) {
			delete(v, n)
			found = true
		}
	}
	return found
}

// maxFormBody bounds the form body a POST to a [KindHTTP] provider may
// carry: it is read whole to look for methodOverrideParam.
const maxFormBody = 1 << 20

// errMethodOverrideBody refuses a POST whose form body could make the
// upstream take it as another method.
var errMethodOverrideBody = fmt.Errorf("%w: a form body may name another method (%s)", ErrPathNotAllowed, methodOverrideParam)

// bodyMediaType is the media type of Content-Type ct as PHP and Rack
// read it: lower case, up to the first ';', ',' or white space (so a
// value mime.ParseMediaType refuses, "application/x-www-form-urlencoded,
// text/plain", is still a form to them).
func bodyMediaType(ct string) string {
	ct = strings.ToLower(strings.TrimSpace(ct))
	if i := strings.IndexAny(ct, ";, \t"); i >= 0 {
		ct = ct[:i]
	}
	return ct
}

// checkFormOverride refuses a POST to a [KindHTTP] provider whose body may
// name another method: a form or a JSON object (Laravel takes a JSON
// body's members as the request's parameters, and Symfony its _method)
// with a member isMethodOverrideParam matches, a multipart form (not
// parsed here), a content-encoded one, or a form over maxFormBody or
// JSON over maxModelBody (not read whole). It holds the body it reads
// (holdBody: ErrBusy when the gateway holds too much) and puts it back
// readable from the start; release is to be called once the request is
// done, whether or not err is nil.
func (g *Gateway) checkFormOverride(r *http.Request, holder string) (release func(), err error) {
	release = func() {}
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return release, nil
	}
	mt := bodyMediaType(r.Header.Get("Content-Type"))
	limit := int64(maxFormBody)
	switch {
	case mt == "multipart/form-data":
		return release, fmt.Errorf("%w: multipart form bodies are not forwarded (a part may name another method, %s)", ErrPathNotAllowed, methodOverrideParam)
	case mt == "application/x-www-form-urlencoded":
	case strings.HasSuffix(mt, "/json") || strings.HasSuffix(mt, "+json"):
		limit = maxModelBody
	default:
		return release, nil
	}
	if contentEncoded(r.Header) {
		return release, errMethodOverrideBody // not read here: it could hold anything
	}
	b, release, err := g.holdBody(r, limit, holder)
	if err != nil {
		return release, err
	}
	if b == nil {
		return release, errMethodOverrideBody // over the limit
	}
	if mt == "application/x-www-form-urlencoded" {
		v, err := url.ParseQuery(string(b))
		if err != nil || dropMethodOverrides(v) {
			return release, errMethodOverrideBody
		}
		return release, nil
	}
	if jsonNamesMethodOverride(b) {
		return release, errMethodOverrideBody
	}
	return release, nil
}

// jsonNamesMethodOverride reports whether b, if it is a JSON object, has
// a top-level member isMethodOverrideParam matches (names decoded); a
// body that is not well-formed JSON is forwarded as is (no framework
// takes parameters from it).
func jsonNamesMethodOverride(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if k, _ := t.(string); isMethodOverrideParam(k) {
			return true
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
