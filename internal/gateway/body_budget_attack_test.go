package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAttackBodyBudgetHeldByOneToken: holdBody reserves a body's declared
// Content-Length+1 (or limit+1, 16 MiB, for a chunked body) as soon as
// the request arrives, before any byte of the body does, and holds the
// reservation while it waits for the body (up to serve's 60 s
// ReadTimeout). The 64 MiB budget is shared by every tenant and token, so
// one token opening four requests declaring 16 MiB that send nothing makes every
// other tenant's model-scoped request 503 busy: one sandbox denied the
// gateway to all, with no memory actually held. A sandbox holds at most
// maxHeldPerHolder (one of the largest bodies) over all its tokens (one
// per process: here each request has its own): the other tenant gets in.
func TestAttackBodyBudgetHeldByOneToken(t *testing.T) {
	e := newEnv(t)
	victim := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, Tenant: "good", Agent: "b"}).Token
	var writers []*io.PipeWriter
	defer func() {
		for _, w := range writers {
			w.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	for range 4 {
		attacker := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, Tenant: "evil", Agent: "a"}).Token
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", pr)
		req.ContentLength = maxHeldBodies/4 - 1 // holdBody reserves Content-Length+1: a quarter of the budget
		req.Header.Set("Authorization", "Bearer "+attacker)
		req.Header.Set("Content-Type", "application/json")
		go func() {
			if resp, err := e.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// Wait for the attacker's token to hold its share of the budget.
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.g.held.mu.Lock()
		n := len(e.g.held.bytes)
		e.g.held.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("none of the four requests reserved the budget")
		}
		time.Sleep(10 * time.Millisecond)
	}
	req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+victim)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		t.Errorf("another tenant's 37-byte request: %d %q while one sandbox holds four requests declaring 16 MiB open, one per token (no body bytes sent): the whole 64 MiB budget is reserved up front per request, with no share per sandbox", resp.StatusCode, strings.TrimSpace(string(b)))
	}
}
