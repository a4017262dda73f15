package gateway

import (
	"fmt"
	"mime"
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

// isMethodOverrideParam reports whether parameter name n (decoded) is
// methodOverrideParam as PHP reads it into $_GET and $_POST: leading
// spaces dropped, then ' ', '.' and the first '[' (when no ']' closes
// it) as '_'; letter case ignored.
func isMethodOverrideParam(n string) bool {
	n = strings.TrimLeft(n, " ")
	var b strings.Builder
	bracket := false
	for i := 0; i < len(n); i++ {
		switch c := n[i]; {
		case c == ' ' || c == '.':
			b.WriteByte('_')
		case c == '[' && !bracket:
			bracket = true
			if !strings.Contains(n[i:], "]") {
				b.WriteByte('_')
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return strings.EqualFold(b.String(), methodOverrideParam)
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

// checkFormOverride refuses a POST to a [KindHTTP] provider whose body is
// a form that names methodOverrideParam (in any spelling PHP reads as
// it), a multipart form (not parsed here), or an urlencoded form over
// maxFormBody. It holds an urlencoded body (holdBody: ErrBusy when the
// gateway holds too much) and puts it back readable from the start;
// release is to be called once the request is done.
func (g *Gateway) checkFormOverride(r *http.Request) (release func(), err error) {
	release = func() {}
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return release, nil
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "multipart/form-data":
		return release, fmt.Errorf("%w: multipart form bodies are not forwarded (a part may name another method, %s)", ErrPathNotAllowed, methodOverrideParam)
	case "application/x-www-form-urlencoded":
	default:
		return release, nil
	}
	if contentEncoded(r.Header) {
		return release, errMethodOverrideBody // not read here: it could hold anything
	}
	b, release, err := g.holdBody(r, maxFormBody)
	if err != nil {
		return release, err
	}
	if b == nil {
		return release, errMethodOverrideBody // over maxFormBody
	}
	v, err := url.ParseQuery(string(b))
	if err != nil || dropMethodOverrides(v) {
		return release, errMethodOverrideBody
	}
	return release, nil
}
