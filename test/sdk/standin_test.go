package sdk

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// standIn is a narrow stand-in for the three providers' inference APIs
// (paid APIs that cannot be reached here): OpenAI chat completions,
// Anthropic messages and Gemini generateContent, as JSON and as SSE
// streams shaped like the real ones, so that the official SDKs parse them.
//
// It answers 401 in the provider's own error shape unless the request
// carries exactly that provider's real key, and records every credential
// it saw. The model name picks the behaviour:
//
//	any name       a whole answer; streams carry 3 text events e0 e1 e2
//	gated.ID.N     a stream of N events; each after the first is sent only
//	               after POST /_ctl/release?id=ID (the client read the
//	               previous one), so a gateway that buffers never delivers
//	hold.ID         a stream that sends e0, then nothing until the client
//	               goes away (at most 30 s); GET /_ctl/held?id=ID answers
//	               200 once e0 has been written
//
// Control routes (for the node tests too): GET /_ctl/seen returns the
// credentials seen so far as JSON [{"provider","credential"}].
type standIn struct {
	*httptest.Server
	keys map[string]string

	mu    sync.Mutex
	seen  []seenCred
	gates map[string]chan struct{}
	held  map[string]bool
	stall []string
}

type seenCred struct {
	Provider   string `json:"provider"`
	Credential string `json:"credential"`
}

func newStandIn(keys map[string]string) *standIn {
	s := &standIn{keys: keys, gates: map[string]chan struct{}{}, held: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.openai)
	mux.HandleFunc("POST /v1/messages", s.anthropic)
	mux.HandleFunc("POST /v1beta/models/{call}", s.gemini)
	mux.HandleFunc("POST /v1/models/{call}", s.gemini) // @google/genai 3 calls v1
	mux.HandleFunc("POST /_ctl/release", func(w http.ResponseWriter, r *http.Request) {
		s.gate(r.URL.Query().Get("id")) <- struct{}{}
	})
	mux.HandleFunc("GET /_ctl/held", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ok := s.held[r.URL.Query().Get("id")]
		s.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
		}
	})
	mux.HandleFunc("GET /_ctl/seen", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(s.credentials())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "stand-in: no route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	})
	s.Server = httptest.NewServer(mux)
	return s
}

func (s *standIn) gate(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gates[id]
	if !ok {
		g = make(chan struct{}, 64)
		s.gates[id] = g
	}
	return g
}

// credentials returns every credential the stand-in received.
func (s *standIn) credentials() []seenCred {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenCred(nil), s.seen...)
}

// stalled lists the gated streams whose client never released an event:
// the events did not reach it while the stream was open.
func (s *standIn) stalled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.stall...)
}

// authorized records the credential the gateway forwarded and reports
// whether it is the provider's real key.
func (s *standIn) authorized(provider, cred string) bool {
	s.mu.Lock()
	s.seen = append(s.seen, seenCred{provider, cred})
	s.mu.Unlock()
	return cred == s.keys[provider]
}

// request is the part of every provider's request body the stand-in reads.
type request struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

func readRequest(r *http.Request) request {
	var req request
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = json.Unmarshal(b, &req)
	return req
}

// stream writes the events of one SSE answer: before event i > 0 of a
// gated stream it waits for the client's release; a held stream stops
// after event 0 until the client goes away.
func (s *standIn) stream(w http.ResponseWriter, r *http.Request, model string, head string, event func(i int, last bool) string, tail string) {
	n, id, mode := 3, "", ""
	if parts := strings.Split(model, "."); len(parts) >= 2 {
		mode, id = parts[0], parts[1]
		if mode == "gated" && len(parts) == 3 {
			n, _ = strconv.Atoi(parts[2])
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func(s string) {
		_, _ = io.WriteString(w, s)
		w.(http.Flusher).Flush()
	}
	flush(head)
	for i := range n {
		if i > 0 && mode == "gated" {
			select {
			case <-s.gate(id):
			case <-time.After(5 * time.Second):
				s.mu.Lock()
				s.stall = append(s.stall, fmt.Sprintf("%s before event %d", id, i))
				s.mu.Unlock()
			case <-r.Context().Done():
				return
			}
		}
		flush(event(i, i == n-1))
		if mode == "hold" {
			s.mu.Lock()
			s.held[id] = true
			s.mu.Unlock()
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
	}
	flush(tail)
}

func (s *standIn) openai(w http.ResponseWriter, r *http.Request) {
	if !s.authorized("openai", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		return
	}
	req := readRequest(r)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-standin","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, req.Model)
		return
	}
	s.stream(w, r, req.Model, "", func(i int, last bool) string {
		finish := "null"
		if last {
			finish = `"stop"`
		}
		return fmt.Sprintf("data: {\"id\":\"chatcmpl-standin\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"e%d\"},\"finish_reason\":%s}]}\n\n", req.Model, i, finish)
	}, "data: [DONE]\n\n")
}

func (s *standIn) anthropic(w http.ResponseWriter, r *http.Request) {
	if !s.authorized("anthropic", r.Header.Get("X-Api-Key")) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		return
	}
	req := readRequest(r)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_standin","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`, req.Model)
		return
	}
	head := fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_standin\",\"type\":\"message\",\"role\":\"assistant\",\"model\":%q,\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n", req.Model) +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	tail := "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	s.stream(w, r, req.Model, head, func(i int, _ bool) string {
		return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"e%d\"}}\n\n", i)
	}, tail)
}

func (s *standIn) gemini(w http.ResponseWriter, r *http.Request) {
	if !s.authorized("gemini", r.Header.Get("X-Goog-Api-Key")+r.URL.Query().Get("key")) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`)
		return
	}
	call := r.PathValue("call")
	i := strings.LastIndexByte(call, ':')
	if i < 0 {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	model, method := call[:i], call[i+1:]
	_ = readRequest(r)
	switch method {
	case "generateContent":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2},"modelVersion":%q}`, model)
	case "streamGenerateContent":
		s.stream(w, r, model, "", func(i int, last bool) string {
			finish := ""
			if last {
				finish = `,"finishReason":"STOP"`
			}
			return fmt.Sprintf("data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"e%d\"}]}%s,\"index\":0}],\"modelVersion\":%q}\r\n\r\n", i, finish, model)
		}, "")
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}
