package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeepAliveStreamsWhole sends 1,000 alternating normal and streaming
// calls on one keep-alive client connection through the gateway to an
// upstream that answers at once, before reading the request body (3-10
// KiB, more than the transport's write buffer), as a fast local
// OpenAI-compatible server may. No stream may be cut: the request body
// must stay readable after the response header is written
// (golang/go#40747), or the transport's failed read of it closes the
// upstream connection under the stream. Before the fix 12-15 of the 500
// streams were cut and the client needed a new connection each time.
func TestKeepAliveStreamsWhole(t *testing.T) {
	const calls, events = 1000, 5
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"x","choices":[]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range events {
			fmt.Fprintf(w, "data: {\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Microsecond)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer fast.Close()
	e := newEnv(t, func(o *Options) { o.Providers["compat"] = ProviderConfig{BaseURL: fast.URL} })
	m := e.mint(t, Grant{Providers: []string{"compat"}})
	tr := &http.Transport{MaxConnsPerHost: 1, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var conns atomic.Int32
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			conns.Add(1)
		}
	}}
	cut := 0
	for i := range calls {
		path := "/compat/v1/chat/completions"
		body := fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":%q}]}`, i%2 == 1, strings.Repeat("hi ", 1000+i*7))
		req, _ := http.NewRequest("POST", e.data.URL+path, strings.NewReader(body))
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		req.Header.Set("Authorization", "Bearer "+m.Token)
		req.Header.Set("Content-Type", "application/json")
		if i%2 == 1 {
			req.Header.Set("Accept", "text/event-stream") // as the SDKs do
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if i%2 == 0 {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("call %d = %d, %v", i, resp.StatusCode, err)
			}
			continue
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
		resp.Body.Close()
		if sc.Err() != nil || n != events+1 {
			cut++
			t.Logf("stream %d: %d of %d events, %v", i, n, events+1, sc.Err())
		}
	}
	t.Logf("streams cut: %d of %d; client connections: %d", cut, calls/2, conns.Load())
	if cut != 0 {
		t.Errorf("%d of %d streams cut, want 0", cut, calls/2)
	}
	if c := conns.Load(); c != 1 {
		t.Errorf("client used %d connections, want 1 keep-alive connection", c)
	}
}

// TestUnreadBodyThenNextRequest: a request whose body nobody read (the
// upstream could not be dialled) followed by another on the same client
// connection. In full duplex the server must not be left to consume the
// body after the handler returned (it would read the connection twice at
// once and reset it).
func TestUnreadBodyThenNextRequest(t *testing.T) {
	deadURL := deadUpstream(t)
	e := newEnv(t, func(o *Options) { o.Providers["gemini"] = ProviderConfig{BaseURL: deadURL} })
	tok := e.mint(t, Grant{Providers: []string{"gemini", "openai"}}).Token
	for i := range 3 {
		if code, _, _ := e.do(t, "POST", "/gemini/v1beta/models/g:generateContent", bearer(tok), `{"contents":[]}`); code != http.StatusBadGateway {
			t.Fatalf("call %d to a dead upstream = %d, want 502", i, code)
		}
		if code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", bearer(tok), `{"model":"m"}`); code != 200 {
			t.Fatalf("call %d after it = %d %q, want 200", i, code, body)
		}
	}
}
