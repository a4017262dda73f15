package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// chunkedBody hides the reader's length from net/http: the client sends
// it with Transfer-Encoding: chunked (no Content-Length).
func chunkedBody(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }

// FINDING (medium, over-refusal): holdBody reserves limit+1 (32 MiB + 1)
// for a body of unknown length (chunked; HTTP/2 without content-length),
// and maxHeldPerHolder is exactly maxModelBody+1. So a sandbox's chunked
// request is refused 503 busy whenever ANY other body of the same
// sandbox is held, and a held body is kept counted until its request
// ends (a model stream: minutes). One agent with a streaming call in
// flight (a 37-byte body) cannot send a second, 37-byte, chunked one.
// Should: a small chunked body is let in while the sandbox holds far less
// than its share (e.g. reserve in steps as bytes arrive, or let the
// reservation of an unknown length exceed the share only by what is
// actually read).
func TestAttack5ChunkedRefusedWhileSandboxHoldsAnyBody(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	reached := make(chan struct{}, 4)
	e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
		<-release
		io.WriteString(w, `{}`)
	})
	tok := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, Tenant: "t", Agent: "a"}).Token
	body := `{"model":"gpt-4o-mini","messages":[]}`
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := e.client.Do(req)
		if err != nil {
			first <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("first request never reached the upstream")
	}
	req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", chunkedBody(body))
	req.Header.Set("Authorization", "Bearer "+tok)

	done := make(chan struct{})
	var code int
	var msg []byte
	go func() {
		defer close(done)
		resp, err := e.client.Do(req)
		if err != nil {
			return
		}
		msg, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		code = resp.StatusCode
	}()
	time.Sleep(300 * time.Millisecond)
	close(release)
	<-done
	<-first
	if code != http.StatusOK {
		t.Errorf("second 37-byte chunked request of a sandbox holding 38 bytes: %d %q; a body of unknown length reserves 32 MiB+1, the sandbox's whole share", code, strings.TrimSpace(string(msg)))
	}
}

// HELD: a chunked body alone is let in, checked and forwarded as sent,
// and its bytes are given back.
func TestAttack5ChunkedAloneHeld(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, Tenant: "t", Agent: "a"}).Token
	body := `{"model":"gpt-4o-mini","messages":[]}`
	req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", chunkedBody(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chunked body: %d", resp.StatusCode)
	}
	if got := string(e.up["openai"].last(t).Body); got != body {
		t.Errorf("upstream got %q, want %q", got, body)
	}
	waitHeldZero(t, e.g, "a chunked request")
}

// zeros is an endless reader of 'a'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// FINDING (low, over-refusal / off by one): maxHeldBodies is documented
// as "128 MiB: four of the largest bodies at once", but holdBody
// reserves Content-Length+1 and keeps len(body) counted; four bodies of
// exactly maxModelBody from four sandboxes reserve 4*(32 MiB+1) > 128
// MiB, so the fourth is refused 503 busy while 3 bytes short. Should:
// four of the largest bodies fit (budget 4*(maxModelBody+1), or the +1
// given back before the check of the next).
func TestAttack5FourLargestBodiesDoNotFit(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 128 MiB")
	}
	e := newEnv(t)
	var releases []func()
	defer func() {
		for _, f := range releases {
			f()
		}
	}()
	for i := range 4 {
		r := httptest.NewRequest("POST", "/openai/v1/chat/completions", io.LimitReader(zeros{}, maxModelBody))
		r.ContentLength = maxModelBody
		b, release, err := e.g.holdBody(r, maxModelBody, "sandbox "+string(rune('a'+i)))
		releases = append(releases, release)
		if err != nil {
			t.Errorf("body %d of exactly maxModelBody from its own sandbox: %v (documented: four of the largest bodies at once)", i+1, err)
			continue
		}
		if len(b) != maxModelBody {
			t.Errorf("body %d: held %d bytes", i+1, len(b))
		}
	}

}
