package gateway

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// setErrs makes ListRevocations and LookupToken fail with these errors
// (nil: answer).
func (m *memStore) setErrs(list, lookup error) {
	m.mu.Lock()
	m.listErr, m.lookupErr = list, lookup
	m.mu.Unlock()
}

// TestStaleRevocationViewFailsClosed: when the store stops answering
// polls, the gateway refuses every request with 503 "gateway revocation
// view is stale" (Retry-After) and cuts the streams in flight once the
// view is older than MaxStaleness, and serves again once a poll succeeds.
func TestStaleRevocationViewFailsClosed(t *testing.T) {
	const poll, bound = 20 * time.Millisecond, 200 * time.Millisecond
	e := newEnv(t, func(o *Options) { o.PollInterval = poll; o.MaxStaleness = bound })
	m := e.mint(t, Grant{Providers: []string{"openai"}})
	if code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 200 {
		t.Fatalf("before the outage = %d %q", code, body)
	}
	upstreamDone := make(chan struct{})
	e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: x\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(upstreamDone)
	})
	req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+m.Token)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := readWithin(t, br, 3*time.Second); line != "data: x\n" {
		t.Fatalf("first stream line = %q", line)
	}

	down := time.Now()
	e.store.setErrs(errors.New("connection refused"), nil)
	select {
	case <-upstreamDone:
	case <-time.After(bound + time.Second):
		t.Fatalf("stream still open %v after the store went away (MaxStaleness %v)", time.Since(down), bound)
	}
	cut := time.Since(down)
	e.up["openai"].setHandler(nil)
	t.Logf("stream cut %v after the store went away (MaxStaleness %v, poll %v)", cut, bound, poll)
	if cut < bound-poll {
		t.Errorf("stream cut after %v, before the view could be %v old", cut, bound)
	}
	code, hdr, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}")
	if code != http.StatusServiceUnavailable || body != "gateway revocation view is stale\n" || hdr.Get("Retry-After") != "1" {
		t.Errorf("while stale = %d %q Retry-After %q; want 503 gateway revocation view is stale, Retry-After 1", code, body, hdr.Get("Retry-After"))
	}
	if err := e.g.Current(t.Context()); !errors.Is(err, ErrRevocationStale) {
		t.Errorf("Current() while stale = %v, want ErrRevocationStale", err)
	}
	if strings.Contains(e.logs.String(), m.Token) {
		t.Error("the log holds the token")
	}

	e.store.setErrs(nil, nil)
	eventually(t, "the gateway to serve again once the store answers", func() bool {
		code, _, _ := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}")
		return code != http.StatusServiceUnavailable
	})
	if err := e.g.Current(t.Context()); err != nil {
		t.Errorf("Current() once polled again = %v", err)
	}
}

func TestMaxStalenessValidated(t *testing.T) {
	if g, err := New(t.Context(), Options{Store: newMemStore(), SigningKey: newKey(t), PollInterval: time.Second, MaxStaleness: 1500 * time.Millisecond}); err == nil {
		g.Close()
		t.Error("New(MaxStaleness under 2 × PollInterval) = nil error")
	}
}

// TestStalenessIgnoresClockSteps: staleness is measured on the monotonic
// clock, so a step of the wall clock (or of Options.Now) neither makes a
// current view stale nor a stale one current.
func TestStalenessIgnoresClockSteps(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, func(o *Options) { o.Now = clock; o.PollInterval = time.Second; o.MaxStaleness = 5 * time.Second })
	m := e.mint(t, Grant{Providers: []string{"openai"}})
	mu.Lock()
	now = now.Add(10 * time.Minute) // the clock steps forward
	mu.Unlock()
	if code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 200 {
		t.Errorf("after a 10-minute clock step = %d %q, want 200", code, body)
	}
	if err := e.g.Current(t.Context()); err != nil {
		t.Errorf("Current() after a clock step = %v", err)
	}
}
