package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// callLog is a Recorder that keeps what it gets.
type callLog struct {
	mu    sync.Mutex
	calls []Call
}

func (l *callLog) RecordCall(_ context.Context, c Call) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *callLog) all() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Call(nil), l.calls...)
}

const anthropicToolStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":21,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"Bash","input":{}}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"and\": \"ls\"}"}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":17}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

// TestRecorderSeesRunCalls: a request with a run's token is handed to the
// Recorder once its response ended, with the tool use the model
// requested (split across SSE events), usage, status, and the SHA-256 of
// the bodies as forwarded and as delivered; a refused request of the
// same token is recorded with its outcome; a token without a run is
// never recorded.
func TestRecorderSeesRunCalls(t *testing.T) {
	log := &callLog{}
	e := newEnv(t, func(o *Options) { o.Recorder = log })
	e.up["anthropic"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range strings.SplitAfter(anthropicToolStream, "\n\n") {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	})
	m := e.mint(t, Grant{Providers: []string{"anthropic"}, RunID: "run-7", Tenant: "agents", Agent: "a1"})
	reqBody := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	code, _, body := e.do(t, "POST", "/anthropic/v1/messages", map[string]string{"X-Api-Key": m.Token}, reqBody)
	if code != 200 || body != anthropicToolStream {
		t.Fatalf("stream = %d %q", code, body)
	}
	// Refused after the token checks: recorded with its outcome.
	if code, _, _ := e.do(t, "POST", "/openai/v1/chat/completions", bearer(m.Token), "{}"); code != 403 {
		t.Fatalf("other provider = %d, want 403", code)
	}
	// No run: not recorded.
	plain := e.mint(t, Grant{Providers: []string{"anthropic"}})
	e.do(t, "POST", "/anthropic/v1/messages", map[string]string{"X-Api-Key": plain.Token}, reqBody)

	calls := log.all()
	if len(calls) != 2 {
		t.Fatalf("recorded %d calls, want 2: %+v", len(calls), calls)
	}
	c := calls[0]
	if c.RunID != "run-7" || c.Tenant != "agents" || c.Agent != "a1" || c.JTI != m.JTI || c.Provider != "anthropic" ||
		c.PathClass != "messages" || c.Status != 200 || c.Outcome != outcomeProxied || !c.Stream || c.Model != "claude-sonnet-4-5" {
		t.Fatalf("call = %+v", c)
	}
	if c.RequestSHA256 != sha256.Sum256([]byte(reqBody)) || c.ResponseSHA256 != sha256.Sum256([]byte(anthropicToolStream)) {
		t.Fatal("body digests do not match what was forwarded and delivered")
	}
	res := c.Response
	if len(res.Uses) != 1 || res.Uses[0].Name != "Bash" || string(res.Uses[0].Args) != `{"command":"ls"}` ||
		res.Usage.InputTokens != 21 || res.Usage.OutputTokens != 17 || res.StopReason != "tool_use" {
		t.Fatalf("response = %+v", res)
	}
	if c.Duration <= 0 || c.FirstByte <= 0 || c.FirstByte > c.Duration || time.Since(c.Started) > time.Minute {
		t.Fatalf("timing = %v / %v", c.FirstByte, c.Duration)
	}
	if r := calls[1]; r.Status != 403 || r.Outcome != outcomeForbidden || r.Provider != "openai" || len(r.Response.Uses) != 0 {
		t.Fatalf("refused call = %+v", r)
	}
}

// TestRecorderSeesCutStream: a stream cut by a revocation is recorded
// when it ends, with the outcome revoked and the tool use whose
// arguments never completed marked malformed.
func TestRecorderSeesCutStream(t *testing.T) {
	log := &callLog{}
	e := newEnv(t, func(o *Options) { o.Recorder = log })
	release := make(chan struct{})
	e.up["anthropic"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		half := anthropicToolStream[:strings.Index(anthropicToolStream, "event: content_block_stop")]
		half = half[:strings.LastIndex(half[:len(half)-2], "\n\n")+2] // up to the first argument fragment
		io.WriteString(w, half)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	m := e.mint(t, Grant{Providers: []string{"anthropic"}, RunID: "run-8", Tenant: "agents", Agent: "a1"})
	done := make(chan string)
	go func() {
		_, _, body := e.do(t, "POST", "/anthropic/v1/messages", map[string]string{"X-Api-Key": m.Token}, `{"model":"m","stream":true}`)
		done <- body
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.up["anthropic"].requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if code, b := e.adminPost(t, "/v1/gateway/tokens/"+m.JTI+"/revoke", ""); code != 204 {
		t.Fatalf("revoke = %d %s", code, b)
	}
	body := <-done
	close(release)
	if !strings.Contains(body, "gateway token revoked") {
		t.Fatalf("cut stream = %q", body)
	}
	calls := log.all()
	if len(calls) != 1 {
		t.Fatalf("recorded %d calls", len(calls))
	}
	c := calls[0]
	if c.Outcome != outcomeRevoked || len(c.Response.Uses) != 1 || !c.Response.Uses[0].Malformed || c.Response.Uses[0].Name != "Bash" {
		t.Fatalf("cut call = %+v", c)
	}
	if c.ResponseSHA256 != sha256.Sum256([]byte(body)) {
		t.Fatal("response digest is not of what the client got")
	}
}

// Bind: a context bound to a token ends when the token is revoked, and
// is ended at once for a token already revoked.
func TestBindEndsWithTheToken(t *testing.T) {
	e := newEnv(t)
	m := e.mint(t, Grant{Providers: []string{"anthropic"}, RunID: "run-9", Tenant: "agents", Agent: "a1"})
	ctx, release := e.g.Bind(context.Background(), m.JTI)
	defer release()
	if ctx.Err() != nil {
		t.Fatal("bound context ended before any revocation")
	}
	if n, err := e.g.RevokeRun(context.Background(), "agents", "a1", "run-9"); err != nil || n != 1 {
		t.Fatalf("RevokeRun = %d, %v; want 1", n, err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("bound context still alive after the revocation")
	}
	if !errors.Is(context.Cause(ctx), ErrRevoked) {
		t.Errorf("cause = %v, want ErrRevoked", context.Cause(ctx))
	}
	late, release2 := e.g.Bind(context.Background(), m.JTI)
	defer release2()
	if late.Err() == nil {
		t.Error("binding a revoked token gave a live context")
	}
	if _, err := e.g.Authenticate(context.Background(), m.Token); !errors.Is(err, ErrRevoked) {
		t.Errorf("Authenticate(revoked) = %v", err)
	}
}
