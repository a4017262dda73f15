package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"testing/iotest"
)

// chunkReader returns its chunks one per Read, then EOF (or err).
type chunkReader struct {
	chunks [][]byte
	err    error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if n == len(c.chunks[0]) {
		c.chunks = c.chunks[1:]
	} else {
		c.chunks[0] = c.chunks[0][n:]
	}
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

func newTestBody(src io.ReadCloser, secrets ...string) *responseBody {
	b := &responseBody{src: src, res: &http.Response{}, ctx: context.Background()}
	for _, s := range secrets {
		b.secrets = append(b.secrets, []byte(s))
	}
	return b
}

// TestScrubEveryOffset: the key split across two upstream reads at every
// offset, and across many one-byte reads, never reaches the client.
func TestScrubEveryOffset(t *testing.T) {
	const key, old = "sk-real-0123456789abcdef", "sk-old-key-xyz"
	for _, body := range []string{
		"prefix " + key + " middle " + key + key + " end",
		key,
		`{"error":{"message":"Incorrect API key provided: ` + key + `"}}`,
		"sk-real-0 sk-real-01 " + key[:len(key)-1] + " and " + old + " ss" + key,
		"data: {\"k\":\"" + key + "\"}\n\n",
	} {
		want := strings.ReplaceAll(strings.ReplaceAll(body, key, redacted), old, redacted)
		for i := 0; i <= len(body); i++ {
			for j := i; j <= len(body); j += max(1, len(body)/7) {
				src := &chunkReader{chunks: [][]byte{[]byte(body[:i]), []byte(body[i:j]), []byte(body[j:])}}
				got, err := io.ReadAll(newTestBody(src, key, old))
				if err != nil || string(got) != want {
					t.Fatalf("split %d,%d of %q = %q, %v; want %q", i, j, body, got, err, want)
				}
			}
		}
		got, err := io.ReadAll(newTestBody(io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), key, old))
		if err != nil || string(got) != want {
			t.Errorf("one byte at a time %q = %q, %v; want %q", body, got, err, want)
		}
	}
}

// TestScrubHoldsOnlyAPossibleSecret: a read is passed on at once except
// for a tail that may start the key; an SSE event is never held once it
// ended.
func TestScrubHoldsOnlyAPossibleSecret(t *testing.T) {
	const key = "sk-real-0123456789abcdef"
	tests := []struct {
		read, out string
		sse       bool
	}{
		{"hello world", "hello world", false},
		{"hello sk-re", "hello ", false},
		{"hello s", "hello ", false},
		{"hello sk-x", "hello sk-x", false},
		{"data: {\"a\":1}\n\n", "data: {\"a\":1}\n\n", true},
		{"data: {\"a\":1}\n\ndata: {\"b\"", "data: {\"a\":1}\n\n", true},
		{"data: {\"a\":1}\r\n\r\n", "data: {\"a\":1}\r\n\r\n", true},
	}
	for _, tt := range tests {
		b := newTestBody(&chunkReader{chunks: [][]byte{[]byte(tt.read)}, err: errBlocked}, key)
		if tt.sse {
			b.endEvent = streamErrorEvent(KindAnthropic, "/v1/messages")
		}
		b.fill()
		if string(b.out) != tt.out {
			t.Errorf("after reading %q: passed on %q, want %q", tt.read, b.out, tt.out)
		}
	}
}

// errBlocked stands for an upstream that has sent nothing more yet.
var errBlocked = fmt.Errorf("blocked")

// TestScrubConstantMemory: a long body without event boundaries or
// secrets keeps what the scrubber holds bounded.
func TestScrubConstantMemory(t *testing.T) {
	const key = "sk-real-0123456789abcdef"
	for _, sse := range []bool{false, true} {
		src := io.NopCloser(io.LimitReader(repeatReader("data: sk-real-0123 x "), 8<<20))
		b := newTestBody(src, key)
		if sse {
			b.endEvent = streamErrorEvent(KindOpenAI, "/v1/chat/completions")
		}
		buf := make([]byte, 4096)
		n := 0
		for {
			m, err := b.Read(buf)
			n += m
			if err != nil {
				break
			}
			if limit := maxHeldEvent + 2*scrubReadSize; cap(b.buf)+cap(b.work) > limit {
				t.Fatalf("sse=%v: buffers grew to %d bytes after %d", sse, cap(b.buf)+cap(b.work), n)
			}
		}
		if n != 8<<20 {
			t.Errorf("sse=%v: read %d bytes, want %d", sse, n, 8<<20)
		}
	}
}

type repeatReader string

func (r repeatReader) Read(p []byte) (int, error) {
	for i := 0; i < len(p); i += copy(p[i:], r) {
	}
	return len(p), nil
}

// TestScrubTrailers: trailer values holding the key are scrubbed, a
// trailer named after it is dropped.
func TestScrubTrailers(t *testing.T) {
	const key = "sk-real-0123456789abcdef"
	res := &http.Response{Trailer: http.Header{"X-Echo": {"key=" + key}, "X-" + key: {"v"}, "X-Ok": {"fine"}}}
	b := newTestBody(io.NopCloser(strings.NewReader("body")), key)
	b.res = res
	if _, err := io.ReadAll(b); err != nil {
		t.Fatal(err)
	}
	want := http.Header{"X-Echo": {"key=" + redacted}, "X-Ok": {"fine"}}
	if fmt.Sprint(res.Trailer) != fmt.Sprint(want) {
		t.Errorf("trailers = %v, want %v", res.Trailer, want)
	}
}

// TestScrubThroughGateway: an upstream that echoes the real key in every
// shape of response; none of it reaches the client.
func TestScrubThroughGateway(t *testing.T) {
	e := newEnv(t)
	key := realKeys["openai"]
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	big := strings.Repeat("x", 70<<10)
	e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		echoed := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch r.URL.Path {
		case "/v1/ok":
			io.WriteString(w, `{"echo":"`+echoed+`"}`)
		case "/v1/error":
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"bad key `+echoed+`"}}`)
		case "/v1/big":
			io.WriteString(w, big+echoed+big+echoed)
		case "/v1/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			ev := "data: {\"echo\":\"" + echoed + "\"}\n\n"
			for i := 1; i < len(ev); i++ { // the key split at every offset across flushes
				io.WriteString(w, ev[:i])
				w.(http.Flusher).Flush()
				io.WriteString(w, ev[i:])
				w.(http.Flusher).Flush()
			}
		case "/v1/trailer":
			w.Header().Set("Trailer", "X-Echo, X-"+echoed)
			io.WriteString(w, "body")
			w.Header().Set("X-Echo", echoed)
			w.Header().Set("X-"+echoed, "named after the key")
		case "/v1/gzip", "/v1/gzip-second", "/v1/gzip-after-empty", "/v1/gzip-listed":
			w.Header()["Content-Encoding"] = map[string][]string{
				"/v1/gzip":             {"gzip"},
				"/v1/gzip-second":      {"identity", "gzip"}, // Get sees only the first line
				"/v1/gzip-after-empty": {"", "gzip"},
				"/v1/gzip-listed":      {"identity, x-gzip"},
			}[r.URL.Path]
			zw := gzip.NewWriter(w)
			io.WriteString(zw, `{"echo":"`+echoed+`"}`)
			zw.Close()
		case "/v1/early-hints":
			// A 1xx goes to the client before the response (ReverseProxy
			// forwards it from a ClientTrace, past ModifyResponse).
			w.Header().Set("Link", "</"+echoed+">; rel=preload")
			w.Header().Set("X-"+echoed, "named after the key")
			w.Header().Set("X-Kept", "1")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			w.Header().Del("X-" + echoed)
			io.WriteString(w, "body")
		case "/v1/trailer-unannounced":
			io.WriteString(w, "body")
			w.(http.Flusher).Flush() // chunked: a trailer can follow
			w.Header().Set(http.TrailerPrefix+"X-Late", echoed)
		}
	})
	for _, tt := range []struct {
		path   string
		status int
		want   string
	}{
		{"/v1/ok", 200, `{"echo":"` + redacted + `"}`},
		{"/v1/error", 401, `{"error":{"message":"bad key ` + redacted + `"}}`},
		{"/v1/big", 200, big + redacted + big + redacted},
		{"/v1/sse", 200, strings.Repeat("data: {\"echo\":\""+redacted+"\"}\n\n", len("data: {\"echo\":\"\"}\n\n")+len(key)-1)},
		{"/v1/trailer", 200, "body"},
		{"/v1/gzip", 502, "upstream unavailable\n"},
		{"/v1/gzip-second", 502, "upstream unavailable\n"},
		{"/v1/gzip-after-empty", 502, "upstream unavailable\n"},
		{"/v1/gzip-listed", 502, "upstream unavailable\n"},
		{"/v1/early-hints", 200, "body"},
		{"/v1/trailer-unannounced", 200, "body"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.data.URL+"/openai"+tt.path, strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Accept-Encoding", "gzip, br")
			var all bytes.Buffer
			var early []int
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					early = append(early, code)
					http.Header(h).Write(&all)
					return nil
				},
			}))
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tt.status || string(body) != tt.want {
				t.Errorf("POST %s = %d %.200q, %v; want %d %.200q", tt.path, resp.StatusCode, body, err, tt.status, tt.want)
			}
			resp.Header.Write(&all)
			resp.Trailer.Write(&all)
			for k := range resp.Trailer { // announced names, with or without a value
				all.WriteString(k + "\n")
			}
			all.Write(body)
			if strings.Contains(strings.ToLower(all.String()), strings.ToLower(key)) {
				t.Errorf("POST %s: the real key reached the client:\n%.500s", tt.path, all.String())
			}
			// A small answer is scrubbed whole and declares its new length.
			if small := tt.path == "/v1/ok" || tt.path == "/v1/error"; small && resp.ContentLength != int64(len(body)) {
				t.Errorf("POST %s: Content-Length %d, want %d", tt.path, resp.ContentLength, len(body))
			}
			if tt.path == "/v1/early-hints" && (len(early) != 1 || !strings.Contains(all.String(), "X-Kept: 1")) {
				t.Errorf("1xx responses %v, headers %q: want the 103 with its secret-free header", early, all.String())
			}
			if tt.path == "/v1/trailer-unannounced" && resp.Trailer.Get("X-Late") != redacted {
				t.Errorf("trailer X-Late = %q, want %q", resp.Trailer.Get("X-Late"), redacted)
			}
			if tt.path == "/v1/trailer" && resp.Trailer.Get("X-Echo") != redacted {
				t.Errorf("trailer X-Echo = %q, want %q", resp.Trailer.Get("X-Echo"), redacted)
			}
			if ae := e.up["openai"].last(t).Header.Values("Accept-Encoding"); len(ae) != 1 || ae[0] != "identity" {
				t.Errorf("upstream got Accept-Encoding %q, want identity", ae)
			}
		})
	}
}

// TestRevokedStreamEndsWithErrorEvent: a stream cut by a revocation ends,
// after its last whole event, with the provider's own error event naming
// the refusal (what each SDK raises as a typed API error), and then a
// clean end; an event the upstream had only begun is dropped. A body
// that is no event stream is still cut.
func TestRevokedStreamEndsWithErrorEvent(t *testing.T) {
	const first = "data: {\"i\":0}\n\n"
	tests := []struct {
		provider, path string
		sse            bool
		want           string
	}{
		{"anthropic", "/v1/messages", true,
			"event: error\ndata: {\"error\":{\"message\":\"gateway token revoked\",\"type\":\"authentication_error\"},\"type\":\"error\"}\n\n"},
		{"openai", "/v1/chat/completions", true,
			"data: {\"error\":{\"code\":\"gateway_refusal\",\"message\":\"gateway token revoked\",\"param\":null,\"type\":\"invalid_request_error\"}}\n\n"},
		{"compat", "/v1/completions", true,
			"data: {\"error\":{\"code\":\"gateway_refusal\",\"message\":\"gateway token revoked\",\"param\":null,\"type\":\"invalid_request_error\"}}\n\n"},
		{"openai", "/v1/responses", true,
			"event: error\ndata: {\"code\":\"gateway_refusal\",\"error\":{\"code\":\"gateway_refusal\",\"message\":\"gateway token revoked\",\"param\":null,\"type\":\"invalid_request_error\"},\"message\":\"gateway token revoked\",\"param\":null,\"type\":\"error\"}\n\n"},
		{"gemini", "/v1beta/models/g:streamGenerateContent?alt=sse", true,
			"{\"error\":{\"code\":401,\"message\":\"gateway token revoked\",\"status\":\"UNAUTHENTICATED\"}}\n\n"},
		{"gemini", "/v1beta/models/g:streamGenerateContent", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.provider+tt.path, func(t *testing.T) {
			e := newEnv(t)
			m := e.mint(t, Grant{Providers: []string{tt.provider}})
			sent := make(chan struct{})
			e.up[tt.provider].setHandler(func(w http.ResponseWriter, r *http.Request) {
				if tt.sse {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				io.WriteString(w, first)
				w.(http.Flusher).Flush()
				io.WriteString(w, "data: {\"i\":1,\"partial")
				w.(http.Flusher).Flush()
				close(sent)
				<-r.Context().Done()
			})
			req, _ := http.NewRequest("POST", e.data.URL+"/"+tt.provider+tt.path, strings.NewReader(`{"stream":true}`))
			req.Header.Set("Authorization", "Bearer "+m.Token)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			<-sent
			got := make([]byte, len(first))
			if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
				t.Fatalf("first event = %q, %v", got, err)
			}
			if err := e.g.Revoke(context.Background(), m.JTI); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(resp.Body)
			if !tt.sse {
				if err == nil {
					t.Errorf("non-SSE body ended cleanly with %q; want it cut", rest)
				}
				return
			}
			if err != nil || string(rest) != tt.want {
				t.Errorf("after the revocation: %q, %v; want %q, then EOF", rest, err, tt.want)
			}
		})
	}
}
