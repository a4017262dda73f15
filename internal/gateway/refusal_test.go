package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// TestRetryHint: permanent refusals say "do not retry", a 429 or 503
// says when to retry, and upstream failures are left to the SDK.
func TestRetryHint(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		err         error
		hint, after string
	}{
		{"revoked", 401, ErrRevoked, "false", ""},
		{"no key", 502, fmt.Errorf("%w x", ErrNoProviderKey), "false", ""},
		{"scope", 403, fmt.Errorf("%w x", ErrProviderScope), "false", ""},
		{"unknown provider", 404, ErrUnknownProvider, "false", ""},
		{"internal", 500, errors.New("x"), "false", ""},
		{"unavailable", 503, errors.New("x"), "true", retryAfterSeconds},
		{"rate", 429, errors.New("x"), "true", retryAfterSeconds},
		{"upstream unavailable", 502, ErrUpstream, "", ""},
		{"upstream timeout", 504, ErrUpstreamTimeout, "", ""},
	}
	for _, tt := range tests {
		h := http.Header{}
		if got := retryHint(h, tt.status, tt.err); got != tt.hint || h.Get("Retry-After") != tt.after {
			t.Errorf("%s: retryHint(%d, %v) = %q, Retry-After %q; want %q, %q", tt.name, tt.status, tt.err, got, h.Get("Retry-After"), tt.hint, tt.after)
		}
	}
}
