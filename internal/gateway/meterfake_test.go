package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProvider stands in for the three providers' inference endpoints
// (a paid API cannot be called here). It answers with the usage the
// request's X-Fake-Input and X-Fake-Output headers ask for (default 5
// and 7), as JSON or as the provider's stream, and keeps every request
// body it got. X-Fake-Delay spaces stream events (Go duration).
// X-Fake-Model (a Go string literal's content, e.g. `x\x00`) names the
// model of an OpenAI chat JSON answer. X-Fake-Early-Usage makes an
// OpenAI chat stream report a usage of 1 and 1 in its first content
// chunk, before the real one.
type fakeProvider struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
	hits   int
}

const fakeRealKey = "sk-real-provider-key-0123456789abcdef"

func newFakeProvider(t testing.TB) *fakeProvider {
	f := &fakeProvider{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProvider) lastBody(t testing.TB) map[string]any {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		t.Fatal("the provider got no request")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(f.bodies[len(f.bodies)-1]), &m); err != nil {
		t.Fatalf("provider got a body that is not JSON: %v", err)
	}
	return m
}

func (f *fakeProvider) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

func headerInt(r *http.Request, k string, def int) int {
	if v, err := strconv.Atoi(r.Header.Get(k)); err == nil {
		return v
	}
	return def
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(b))
	f.hits++
	f.mu.Unlock()
	if r.Header.Get("X-Api-Key") != fakeRealKey && r.Header.Get("Authorization") != "Bearer "+fakeRealKey &&
		r.Header.Get("X-Goog-Api-Key") != fakeRealKey {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	if s := r.Header.Get("X-Fake-Status"); s != "" {
		code, _ := strconv.Atoi(s)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, `{"error":{"type":"rate_limit_error","message":"slow down"}}`)
		return
	}
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(b, &req)
	in, out := headerInt(r, "X-Fake-Input", 5), headerInt(r, "X-Fake-Output", 7)
	delay, _ := time.ParseDuration(r.Header.Get("X-Fake-Delay"))
	flusher := w.(http.Flusher)
	send := func(s string) {
		io.WriteString(w, s)
		flusher.Flush()
		if delay > 0 {
			time.Sleep(delay)
		}
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-fake","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d}}`, in, out)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send(fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-fake\",\"content\":[],\"usage\":{\"input_tokens\":%d,\"output_tokens\":1}}}\n\n", in))
		send("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		for range 3 {
			send("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n")
		}
		send("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
		send(fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", out))
		send("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			model := "gpt-fake"
			if m, err := strconv.Unquote(`"` + r.Header.Get("X-Fake-Model") + `"`); err == nil && m != "" {
				model = m // as a compatible server echoing the request's model would
			}
			mj, _ := json.Marshal(model)
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":`+string(mj)+`,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		usage := ""
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			usage = `,"usage":null`
		}
		for i := range 3 {
			u := usage
			if i == 0 && r.Header.Get("X-Fake-Early-Usage") != "" {
				// Some OpenAI-compatible servers report the usage so
				// far in content chunks too.
				u = `,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`
			}
			send(fmt.Sprintf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-fake\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d\"},\"finish_reason\":null}]%s}\n\n", i, u))
		}
		send(fmt.Sprintf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-fake\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]%s}\n\n", usage))
		if usage != "" {
			send(fmt.Sprintf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", in, out, in+out))
		}
		send("data: [DONE]\n\n")
	case strings.Contains(r.URL.Path, ":streamGenerateContent"):
		// Gemini reports the usage so far in every chunk: out tokens
		// over 4 chunks.
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= 4; i++ {
			finish := ""
			if i == 4 {
				finish = `,"finishReason":"STOP"`
			}
			send(fmt.Sprintf("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"w%d\"}],\"role\":\"model\"},\"index\":0%s}],\"usageMetadata\":{\"promptTokenCount\":%d,\"candidatesTokenCount\":%d},\"modelVersion\":\"gemini-fake\"}\n\n", i, finish, in, out*i/4))
		}
	case strings.Contains(r.URL.Path, ":generateContent"):
		w.Header().Set("Content-Type", "application/json")
		q := r.URL.Query()
		if q.Has("fields") || q.Has("$fields") || r.Header.Get("X-Goog-FieldMask") != "" {
			// A field mask (Google's system parameter) leaves out what
			// it does not name.
			io.WriteString(w, `{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP","index":0}]}`)
			return
		}
		tool := ""
		if n := headerInt(r, "X-Fake-Tool-Prompt", 0); n > 0 {
			// Input a provider-run tool (url_context, google_search)
			// brought in, billed as input, not in promptTokenCount.
			tool = fmt.Sprintf(`,"toolUsePromptTokenCount":%d`, n)
		}
		fmt.Fprintf(w, `{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":%d%s},"modelVersion":"gemini-fake"}`, in, out, tool)
	case strings.Contains(r.URL.Path, "/responses/") && (r.Method == http.MethodGet || strings.HasSuffix(r.URL.Path, "/cancel")):
		// Retrieving (or cancelling) a Responses API response made
		// earlier.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-fake","output":[],"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[]}`)
	}
}
