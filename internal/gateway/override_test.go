package gateway

import (
	"net/http"
	"testing"
)

// TestFormBodyOverride: a POST to a kind http provider with an
// urlencoded form or JSON body is forwarded whole when no (top-level)
// field names _method (as PHP reads names), and refused (403) when one
// does, or when the body is multipart.
func TestFormBodyOverride(t *testing.T) {
	e, up, tok := newMethodOverrideEnv(t)
	form := func(ct, body string) int {
		hdr := bearer(tok)
		hdr["Content-Type"] = ct
		code, _, _ := e.do(t, "POST", "/acme/items/5", hdr, body)
		return code
	}
	const plain = "amount=100&currency=usd&metadata%5Border%5D=7"
	if code := form("application/x-www-form-urlencoded", plain); code != http.StatusOK {
		t.Fatalf("a form without _method: %d, want 200", code)
	}
	if got := string(up.last(t).Body); got != plain {
		t.Errorf("the upstream got %q, want the form as sent %q", got, plain)
	}
	for _, body := range []string{"_method=DELETE", "a=1&.method=DELETE", "%5Bmethod=PUT", "+_method=PATCH"} {
		if code := form("application/x-www-form-urlencoded; charset=utf-8", body); code != http.StatusForbidden {
			t.Errorf("form %q: %d, want 403", body, code)
		}
	}
	const js = `{"amount":100,"nested":{"_method":"DELETE"}}` // only a top-level _method is read
	if code := form("application/json", js); code != http.StatusOK {
		t.Fatalf("a JSON body without a top-level _method: %d, want 200", code)
	}
	if got := string(up.last(t).Body); got != js {
		t.Errorf("the upstream got %q, want the JSON as sent %q", got, js)
	}
	for _, body := range []string{`{"a":1,"_method":"DELETE"}`, `{"_Method":"PUT"}`, `{"_meth\u006fd":"PATCH"}`} {
		if code := form("application/vnd.api+json", body); code != http.StatusForbidden {
			t.Errorf("JSON %s: %d, want 403", body, code)
		}
	}
	if code := form("multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--x--\r\n"); code != http.StatusForbidden {
		t.Errorf("multipart form: %d, want 403", code)
	}
}
