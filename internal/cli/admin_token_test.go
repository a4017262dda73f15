package cli

import (
	"log/slog"
	"net/http/httptest"
	"testing"
)

// The static admin token is admitted exactly: the same bytes, not a
// prefix of it nor it with more after (the comparison is over digests, so
// that its time does not depend on the length presented).
func TestAdminTokenExact(t *testing.T) {
	tok := "0123456789abcdef0123456789abcdef"
	a := &adminAuth{token: []byte(tok), log: slog.New(slog.DiscardHandler)}
	for presented, ok := range map[string]bool{
		tok:           true,
		tok + "x":     false,
		tok[:31]:      false,
		"x" + tok[1:]: false,
		"":            false,
	} {
		r := httptest.NewRequest("GET", "/v1/admin/x", nil)
		if presented != "" {
			r.Header.Set("Authorization", "Bearer "+presented)
		}
		if err := a.check(r); (err == nil) != ok {
			t.Errorf("check(%q) = %v, want admitted %v", presented, err, ok)
		}
	}
	none := &adminAuth{log: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest("GET", "/v1/admin/x", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if none.check(r) == nil {
		t.Error("no admin token configured: a bearer token was admitted")
	}
}
