package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttack9RememberInvalidUTF8: Remember encoded its arguments with
// encoding/json, which replaces invalid UTF-8 with U+FFFD, so a text,
// key or tag that is not UTF-8 was stored changed with no error (the
// server refuses invalid UTF-8, but never saw it). It must fail before
// sending anything.
func TestAttack9RememberInvalidUTF8(t *testing.T) {
	var remembered atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/auth/kubernetes":
			json.NewEncoder(w).Encode(map[string]any{"key": "ck_test", "tenant": "t", "agent": "a", "expires_at": time.Now().Add(time.Hour)})
		case strings.HasSuffix(r.URL.Path, "/memories"):
			remembered.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"7000000000000001","status":"created"}`))
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
	for name, args := range map[string][]string{
		"text": {"fact", "", "a\xffb"},
		"key":  {"fact", "k\xc3", "x"},
		"kind": {"f\x80", "", "x"},
		"tag":  {"fact", "", "x", "\xed\xa0\x80"},
	} {
		if _, err := c.Remember(ctx, args[0], args[1], args[2], args[3:]...); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("Remember(invalid %s) = %v, want a UTF-8 error", name, err)
		}
	}
	if n := remembered.Load(); n != 0 {
		t.Errorf("%d remember requests sent, want none", n)
	}
	if _, err := c.Remember(ctx, "fact", "", "café"); err != nil || remembered.Load() != 1 {
		t.Errorf("Remember(valid) = %v, %d requests", err, remembered.Load())
	}
}
