package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttack10AcquireLeaseTTL: AcquireLease sent ttl_seconds as ttl
// truncated to whole seconds, so a lease asked for under a second was
// sent as 0, which the server reads as its default (5 minutes): a lease
// 600 times longer than asked, which blocks the slot's next holder that
// long. A negative ttl was sent as no ttl (the default) too. Now a ttl is
// rounded up to whole seconds and a negative one is an error.
func TestAttack10AcquireLeaseTTL(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/auth/kubernetes":
			json.NewEncoder(w).Encode(map[string]any{"key": "ck_test", "tenant": "t", "agent": "a", "expires_at": time.Now().Add(time.Hour)})
		case strings.HasSuffix(r.URL.Path, "/lease"):
			b, _ := io.ReadAll(r.Body)
			bodies = append(bodies, string(b))
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"name":"plan","epoch":1,"expires_at":"2026-10-12T09:00:00Z","version":0,"state":null}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("projected-token"), 0o600)
	c, err := New(Config{URL: srv.URL, TokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{
		{0, ""},
		{time.Nanosecond, `{"ttl_seconds":1}`},
		{500 * time.Millisecond, `{"ttl_seconds":1}`},
		{time.Second, `{"ttl_seconds":1}`},
		{1500 * time.Millisecond, `{"ttl_seconds":2}`},
		{time.Minute, `{"ttl_seconds":60}`},
	} {
		bodies = nil
		if _, err := c.AcquireLease(ctx, "plan", tc.ttl); err != nil {
			t.Fatalf("AcquireLease(%v) = %v", tc.ttl, err)
		}
		if len(bodies) != 1 || strings.TrimSpace(bodies[0]) != tc.want {
			t.Errorf("AcquireLease(%v) sent %q, want %q", tc.ttl, bodies, tc.want)
		}
	}
	bodies = nil
	if _, err := c.AcquireLease(ctx, "plan", -time.Second); err == nil || len(bodies) != 0 {
		t.Errorf("AcquireLease(-1s) = %v, sent %q; want an error and nothing sent", err, bodies)
	}
}
