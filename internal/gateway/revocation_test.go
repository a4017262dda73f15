package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRevokeCutsStreamInFlight(t *testing.T) {
	e := newEnv(t)
	m := e.mintHTTP(t, `{"providers":["anthropic"],"run_id":"r1"}`)
	upstreamDone := make(chan struct{})
	e.up["anthropic"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i := 0; ; i++ {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(upstreamDone)
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	req, _ := http.NewRequest("POST", e.data.URL+"/anthropic/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("x-api-key", m.Token)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := readWithin(t, br, 3*time.Second); line != "data: 0\n" {
		t.Fatalf("first line = %q", line)
	}
	if code := e.revokeHTTP(t, m.JTI); code != http.StatusNoContent {
		t.Fatalf("revoke = %d, want 204", code)
	}
	revokedAt := time.Now()
	var err2 error
	var last string
	for err2 == nil {
		var line string
		line, err2 = readWithin(t, br, 2*time.Second)
		if strings.HasPrefix(line, "data: ") {
			last = line
		}
	}
	if d := time.Since(revokedAt); d > time.Second {
		t.Errorf("stream ended %v after the revocation, want within 1 s", d)
	}
	// An event stream ends with the provider's error event (see
	// TestRevokedStreamEndsWithErrorEvent).
	if !errors.Is(err2, io.EOF) || !strings.Contains(last, `"message":"gateway token revoked"`) {
		t.Errorf("stream ended with %v after %q; want the error event, then EOF", err2, last)
	}
	select {
	case <-upstreamDone:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request not cancelled by the revocation")
	}
	if code, _, body := e.do(t, "POST", "/anthropic/v1/messages", bearer(m.Token), "{}"); code != 401 || body != "gateway token revoked\n" {
		t.Errorf("after revoke = %d %q, want 401 gateway token revoked", code, body)
	}
}

func TestRevokeBeforeUpstreamAnswers(t *testing.T) {
	e := newEnv(t)
	m := e.mint(t, Grant{Providers: []string{"openai"}})
	entered := make(chan struct{})
	e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
	})
	type result struct {
		code int
		body string
	}
	ch := make(chan result, 1)
	go func() {
		code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}")
		ch <- result{code, body}
	}()
	select {
	case <-entered:
	case r := <-ch:
		t.Fatalf("request ended before reaching the upstream: %d %q", r.code, r.body)
	}
	if err := e.g.Revoke(context.Background(), m.JTI); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.code != 401 || r.body != "gateway token revoked\n" {
			t.Errorf("cut request = %d %q, want 401 gateway token revoked", r.code, r.body)
		}
	case <-time.After(time.Second):
		t.Fatal("request not cut within 1 s of the revocation")
	}
}

func TestRevocationReachesOtherReplica(t *testing.T) {
	a := newEnv(t)
	// Replica b shares a's store and key, as two replicas of one
	// deployment would.
	b := newEnv(t, func(o *Options) { o.Store = a.store; o.SigningKey = a.key })
	m := a.mint(t, Grant{Providers: []string{"openai"}})
	if code, _, body := b.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 200 {
		t.Fatalf("replica b before revoke = %d %q", code, body)
	}
	// A stream in flight on b.
	upstreamDone := make(chan struct{})
	b.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: x\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(upstreamDone)
	})
	req, _ := http.NewRequest("POST", b.data.URL+"/openai/v1/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+m.Token)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readWithin(t, br, 3*time.Second)
	if code := a.revokeHTTP(t, m.JTI); code != 204 {
		t.Fatalf("revoke on a = %d", code)
	}
	select {
	case <-upstreamDone:
	case <-time.After(time.Second):
		t.Fatal("replica b did not cut the stream within 1 s")
	}
	eventually(t, "replica b to refuse the revoked token", func() bool {
		code, _, _ := b.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}")
		return code == 401
	})
}

func TestRevokedAtStartup(t *testing.T) {
	a := newEnv(t)
	m := a.mint(t, Grant{Providers: []string{"openai"}})
	if err := a.g.Revoke(context.Background(), m.JTI); err != nil {
		t.Fatal(err)
	}
	// A fresh gateway on the same store knows at once, before any poll.
	b := newEnv(t, func(o *Options) { o.Store = a.store; o.SigningKey = a.key; o.PollInterval = time.Hour })
	if code, _, body := b.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 401 || body != "gateway token revoked\n" {
		t.Errorf("new gateway = %d %q, want 401 gateway token revoked", code, body)
	}
}
