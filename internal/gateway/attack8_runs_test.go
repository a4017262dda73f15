package gateway

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/providerreach"
)

// attack8Raw writes raw to the gateway's data port and returns the
// status lines of the responses it reads back within a short time.
func attack8Raw(t *testing.T, e *env, raw string) []string {
	t.Helper()
	u, _ := url.Parse(e.data.URL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(c)
	var out []string
	for {
		req, _ := http.NewRequest("GET", "/", nil)
		res, err := http.ReadResponse(br, req)
		if err != nil {
			return out
		}
		res.Body.Close()
		out = append(out, res.Status)
	}
}

func attack8Token(t *testing.T, e *env, prov string) string {
	t.Helper()
	return e.mint(t, Grant{Providers: []string{prov}, Models: []string{"gpt-4o-mini", "gemini-2.5-flash", "claude-sonnet-4-5", "gemini-embedding-001"}, Tenant: "t", Agent: "a"}).Token
}

// HELD: a GET whose body Go reads (chunked, or a Content-Length) runs:
// the body's model is checked, a disallowed one refused; a GET with
// "Content-Length: 0" followed by a body is two requests to Go (the
// second, unparseable or its own request, judged on its own), and the
// proxy re-frames what it forwards, so the upstream never sees bytes the
// gateway did not judge.
func TestAttack8GetWithBodyRuns(t *testing.T) {
	e := newEnv(t) // "/**"
	tok := attack8Token(t, e, "compat")
	bad := `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`
	chunk := func(s string) string {
		return hexN(len(s)) + "\r\n" + s + "\r\n0\r\n\r\n"
	}
	raws := []string{
		"GET /compat/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(bad),
		"GET /compat/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(bad)) + "\r\n\r\n" + bad,
		"GET /compat/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\nContent-Length: 0\r\nContent-Type: application/json\r\n\r\n" + bad,
		"HEAD /compat/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(bad),
		"GET /compat/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\nContent-Type: application/json\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(bad),
	}
	for i, raw := range raws {
		attack8Raw(t, e, raw)
		for _, s := range e.up["compat"].requests() {
			if strings.Contains(string(s.Body), "gpt-5") {
				t.Errorf("raw %d: upstream got a body with gpt-5: %s %s", i, s.Method, s.Body)
			}
		}
	}
}

func hexN(n int) string {
	const d = "0123456789abcdef"
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 16 {
		s = string(d[n%16]) + s
	}
	return s
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// HELD: method overrides are stripped on the bodyless (exempt) path too:
// a GET or a bodyless POST .../cancel carrying X-HTTP-Method-Override,
// X_HTTP_Method_Override, ?_method=POST or ?x-http-method-override
// reaches the upstream without them.
func TestAttack8BodylessOverridesStripped(t *testing.T) {
	e := newEnv(t)
	tok := attack8Token(t, e, "gemini")
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
	}{
		{"GET", "/gemini/v1beta/models/gemini-2.5-pro:generateContent?_method=POST", map[string]string{"X-HTTP-Method-Override": "POST"}},
		{"GET", "/gemini/v1beta/models/gemini-2.5-pro:generateContent?x-http-method-override=POST", map[string]string{"X_HTTP_Method_Override": "POST"}},
		{"POST", "/gemini/v1beta/models/gemini-2.5-pro:generateContent/cancel?_method=POST", map[string]string{"X-Method-Override": "POST", "X-Original-URL": "/v1beta/models/gemini-2.5-pro:generateContent"}},
	} {
		h := map[string]string{"Authorization": "Bearer " + tok}
		for k, v := range c.hdr {
			h[k] = v
		}
		before := len(e.up["gemini"].requests())
		e.do(t, c.method, c.path, h, "")
		reqs := e.up["gemini"].requests()
		if len(reqs) == before {
			continue
		}
		s := reqs[len(reqs)-1]
		for k := range s.Header {
			if isMethodOverride(k) {
				t.Errorf("%s %s: upstream got %s", c.method, c.path, k)
			}
		}
		if strings.Contains(strings.ToLower(s.RawQuery), "method") {
			t.Errorf("%s %s: upstream got query %q", c.method, c.path, s.RawQuery)
		}
	}
}

// HELD: a bodyless POST whose path ends in /cancel skips the model check
// only for a path that names no model a router runs: the Gemini path
// model and a kind-openai request with the model in the query or a
// header are still refused; a POST with a body ending in /cancel runs;
// %2F before cancel is decoded by both sides alike.
func TestAttack8CancelExemption(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		prov, path string
		hdr        map[string]string
		body       string
		fwdOK      bool
	}{
		// bodyless cancel of a Responses background run: passes
		{"openai", "/openai/v1/responses/resp_1/cancel", nil, "", true},
		// a body makes it run: its model is checked
		{"compat", "/compat/v1/chat/completions/cancel", nil, `{"model":"gpt-5"}`, false},
		{"compat", "/compat/v1/chat/completions%2Fcancel", nil, `{"model":"gpt-5"}`, false},
		// model named elsewhere is refused even when the request runs nothing
		{"compat", "/compat/v1/chat/completions/cancel?model=gpt-5", nil, "", false},
		{"compat", "/compat/v1/chat/completions/cancel", map[string]string{"X-Model": "gpt-5"}, "", false},
		// a batch cancel runs nothing (TestAttack8BatchReadsRefused, fixed)
		{"compat", "/compat/v1/batches/b1/cancel", nil, "", true},
	}
	for _, c := range cases {
		tok := attack8Token(t, e, c.prov)
		h := map[string]string{"Authorization": "Bearer " + tok}
		if c.body != "" {
			h["Content-Type"] = "application/json"
		}
		for k, v := range c.hdr {
			h[k] = v
		}
		before := len(e.up[c.prov].requests())
		code, _, msg := e.do(t, "POST", c.path, h, c.body)
		fwd := len(e.up[c.prov].requests()) > before
		if fwd != c.fwdOK {
			t.Errorf("POST %s forwarded=%v want %v (%d %s)", c.path, fwd, c.fwdOK, code, strings.TrimSpace(msg))
		}
	}
}

// HELD: Content-Type spellings a router reads as a form, or that Go's
// mime parser and a Python router disagree on, make the model unknown
// (refused); LiteLLM's `"form" in content_type` on a type Go reads as
// JSON makes Starlette return an empty form (no model at all), not a
// different one.
func TestAttack8ContentTypeSpellings(t *testing.T) {
	e := newEnv(t)
	tok := attack8Token(t, e, "compat")
	for _, ct := range []string{
		"application/x-www-form-urlencoded",
		"Application/X-WWW-Form-Urlencoded",
		"multipart/form-data; boundary=b",
		"application/x-www-form-urlencoded, application/json",
		"application/json, application/x-www-form-urlencoded",
		"application/json;;",
		"application/json; charset=\"utf-8",
		"application/x-www-form-urlencoded;application/json",
	} {
		before := len(e.up["compat"].requests())
		code, _, msg := e.do(t, "POST", "/compat/v1/chat/completions", map[string]string{"Authorization": "Bearer " + tok, "Content-Type": ct}, `{"model":"gpt-4o-mini"}`)
		if len(e.up["compat"].requests()) > before {
			if _, _, err := mimeParse(ct); err == nil && !strings.Contains(strings.ToLower(ct), "form") {
				continue
			}
			t.Errorf("Content-Type %q forwarded (%d %s)", ct, code, strings.TrimSpace(msg))
		}
	}
}

func mimeParse(ct string) (string, map[string]string, error) {
	if providerreach.JSONContentType(ct) {
		return "json", nil, nil
	}
	return "", nil, errNotJSON
}

var errNotJSON = errors.New("not json")
