package gateway

import (
	"net/http"
	"testing"
)

// TestFormBodyOverride: a POST to a kind http provider with an
// urlencoded form body is forwarded whole when no field names _method
// (as PHP reads names), and refused (403) when one does, or when the
// body is multipart.
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
	if code := form("multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--x--\r\n"); code != http.StatusForbidden {
		t.Errorf("multipart form: %d, want 403", code)
	}
}
