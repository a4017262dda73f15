package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// standbyServer answers the exchange with a key, and signer calls with
// 503 signer_standby (Retry-After: 1) for the first standby calls, then
// with code (503 log_conflict, say) or a decision.
func standbyServer(t *testing.T, standby int32, code string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/auth/kubernetes":
			json.NewEncoder(w).Encode(map[string]any{"key": "ck_test", "tenant": "agents", "agent": "a1",
				"expires_at": time.Now().Add(time.Hour)})
			return
		case "/v1/signer/runs/r1/decide":
		default:
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer ck_test" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if calls.Add(1) <= standby {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"signer_standby","message":"standing by"}`))
			return
		}
		if code != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"` + code + `","message":"no"}`))
			return
		}
		w.Write([]byte(`{"call_id":"c1","effect":"allow","rule_ids":["AGENTS-001"],"index":7,"run_seq":1}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func newTestClient(t *testing.T, url string, wait time.Duration) *Client {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("projected-token"), 0o600)
	c, err := New(Config{URL: url, TokenFile: tok, StandbyWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDecideRetriesWhileStandingBy(t *testing.T) {
	srv, calls := standbyServer(t, 2, "")
	c := newTestClient(t, srv.URL, 10*time.Second)
	d, err := c.Decide(context.Background(), "r1", "c1", "Bash", json.RawMessage(`{"command":"ls"}`))
	if err != nil || d.Effect != "allow" || d.Index != 7 {
		t.Fatalf("Decide = %+v, %v; want allow at index 7 after the standby answers", d, err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d signer calls, want 3 (two standby answers, then the decision)", n)
	}
}

func TestDecideGivesUpAfterStandbyWait(t *testing.T) {
	srv, calls := standbyServer(t, 100, "")
	c := newTestClient(t, srv.URL, 1500*time.Millisecond)
	_, err := c.Decide(context.Background(), "r1", "c1", "Bash", nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != "signer_standby" || ce.RetryAfter != time.Second {
		t.Fatalf("Decide = %v, want the standby refusal with Retry-After 1s", err)
	}
	if n := calls.Load(); n < 2 || n > 3 {
		t.Fatalf("%d calls within a 1.5 s wait at Retry-After 1 s, want 2", n)
	}
	c = newTestClient(t, srv.URL, -1)
	calls.Store(0)
	if _, err := c.Decide(context.Background(), "r1", "c1", "Bash", nil); !errors.As(err, &ce) || calls.Load() != 1 {
		t.Fatalf("StandbyWait < 0: %v after %d calls, want one call", err, calls.Load())
	}
}

func TestDecideDoesNotRetryOtherUnavailable(t *testing.T) {
	srv, calls := standbyServer(t, 0, "log_conflict")
	c := newTestClient(t, srv.URL, 10*time.Second)
	_, err := c.Decide(context.Background(), "r1", "c1", "Bash", nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != "log_conflict" || calls.Load() != 1 {
		t.Fatalf("Decide = %v after %d calls, want log_conflict at once", err, calls.Load())
	}
}

// TestWaitApprovalOutlastsTimeout: Config.Timeout bounds a request, but
// WaitApproval's request may take its wait on top (a 60 s wait under the
// default 30 s timeout was cut short); other calls stay bounded.
func TestWaitApprovalOutlastsTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/auth/kubernetes":
			json.NewEncoder(w).Encode(map[string]any{"key": "ck_test", "expires_at": time.Now().Add(time.Hour)})
		case "/v1/signer/runs/r1/approvals/a1", "/v1/signer/runs/r1/status":
			time.Sleep(time.Second) // custody holding a pending approval
			w.Write([]byte(`{"id":"a1","state":"approved"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("projected-token"), 0o600)
	c, err := New(Config{URL: srv.URL, TokenFile: tok, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if a, err := c.WaitApproval(ctx, "r1", "a1", 2*time.Second); err != nil || a.State != "approved" {
		t.Fatalf("WaitApproval = %+v, %v; want approved after the server's 1 s", a, err)
	}
	if _, err := c.RunStatus(ctx, "r1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunStatus against a 1 s answer with a 300ms Timeout = %v, want a deadline error", err)
	}
}

// TestCAFileNeedsHTTPS: a CA file says TLS was meant; an http URL with
// one would send the token in clear, so New refuses it.
func TestCAFileNeedsHTTPS(t *testing.T) {
	_, err := New(Config{URL: "http://custody:8865", TokenFile: "t", CAFile: "ca.pem"})
	if err == nil || !strings.Contains(err.Error(), "not https") {
		t.Fatalf("New(http URL, CA file) = %v, want a refusal", err)
	}
}
