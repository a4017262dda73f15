package gateway

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func TestRefusals(t *testing.T) {
	e := newEnv(t)
	anth := e.mint(t, Grant{Providers: []string{"anthropic"}})
	openai := e.mint(t, Grant{Providers: []string{"openai"}})
	nokey := e.mint(t, Grant{Providers: []string{"nokey"}})
	revoked := e.mint(t, Grant{Providers: []string{"anthropic", "nokey"}})
	if err := e.g.Revoke(context.Background(), revoked.JTI); err != nil {
		t.Fatal(err)
	}
	modelTok := e.mint(t, Grant{Providers: []string{"anthropic", "gemini"}, Models: []string{"claude-ok", "gemini-ok"}})

	// Tokens the gateway did not mint.
	past, _ := NewIssuer(TokenConfig{Now: fixedClock(time.Now().Add(-2 * time.Hour))}, e.key, nil)
	expired, _, _ := past.Mint(Grant{Providers: []string{"anthropic"}, TTL: time.Hour})
	future, _ := NewIssuer(TokenConfig{Now: fixedClock(time.Now().Add(time.Hour))}, e.key, nil)
	notYet, _, _ := future.Mint(Grant{Providers: []string{"anthropic"}})
	wrongIss, _ := NewIssuer(TokenConfig{Issuer: "other"}, e.key, nil)
	wrongIssTok, _, _ := wrongIss.Mint(Grant{Providers: []string{"anthropic"}})
	wrongAud, _ := NewIssuer(TokenConfig{Audience: "other"}, e.key, nil)
	wrongAudTok, _, _ := wrongAud.Mint(Grant{Providers: []string{"anthropic"}})
	stranger, _ := NewIssuer(TokenConfig{}, newKey(t), nil)
	strangerTok, _, _ := stranger.Mint(Grant{Providers: []string{"anthropic"}})
	pub := e.key.Public().(ed25519.PublicKey)
	hsConfusion := signRaw(t, jwt.SigningMethodHS256, []byte(pub), KeyID(pub), &Claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: DefaultIssuer, Audience: jwt.ClaimStrings{DefaultAudience},
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)), ID: "x"},
		Providers: []string{"anthropic"},
	})
	parts := strings.Split(anth.Token, ".")
	noneTok := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + "."

	tests := []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		body   string
		status int
		text   string
	}{
		{"unknown provider", "GET", "/mistral/v1/models", bearer(anth.Token), "", 404, "unknown provider mistral"},
		{"unknown provider without token", "GET", "/mistral/v1/models", nil, "", 404, "unknown provider mistral"},
		{"root", "GET", "/", nil, "", 404, "unknown provider"},
		{"missing token", "POST", "/anthropic/v1/messages", nil, "{}", 401, "missing gateway token"},
		{"basic auth is no token", "POST", "/anthropic/v1/messages", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, "{}", 401, "missing gateway token"},
		{"empty bearer", "POST", "/anthropic/v1/messages", map[string]string{"Authorization": "Bearer "}, "{}", 401, "missing gateway token"},
		{"garbage token", "POST", "/anthropic/v1/messages", bearer("sk-ant-not-a-jwt"), "{}", 401, "invalid gateway token: malformed"},
		{"expired", "POST", "/anthropic/v1/messages", bearer(expired), "{}", 401, "invalid gateway token: expired"},
		{"not yet valid", "POST", "/anthropic/v1/messages", bearer(notYet), "{}", 401, "invalid gateway token: not yet valid"},
		{"wrong issuer", "POST", "/anthropic/v1/messages", bearer(wrongIssTok), "{}", 401, "invalid gateway token: wrong issuer"},
		{"wrong audience", "POST", "/anthropic/v1/messages", bearer(wrongAudTok), "{}", 401, "invalid gateway token: wrong audience"},
		{"unknown kid", "POST", "/anthropic/v1/messages", bearer(strangerTok), "{}", 401, "invalid gateway token: unknown key id"},
		{"alg none", "POST", "/anthropic/v1/messages", bearer(noneTok), "{}", 401, "invalid gateway token: unexpected algorithm"},
		{"HS256 when Ed25519 expected", "POST", "/anthropic/v1/messages", bearer(hsConfusion), "{}", 401, "invalid gateway token: unexpected algorithm"},
		{"bad signature", "POST", "/anthropic/v1/messages", bearer(parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))), "{}", 401, "invalid gateway token: bad signature"},
		{"two different tokens", "POST", "/anthropic/v1/messages", map[string]string{"Authorization": "Bearer " + anth.Token, "x-api-key": openai.Token}, "{}", 401, "invalid gateway token: conflicting tokens"},
		{"token in query and header differ", "GET", "/gemini/v1beta/models?key=" + openai.Token, map[string]string{"x-goog-api-key": anth.Token}, "", 401, "invalid gateway token: conflicting tokens"},
		{"provider scope", "POST", "/anthropic/v1/messages", bearer(openai.Token), "{}", 403, "token not valid for provider anthropic"},
		{"revoked", "POST", "/anthropic/v1/messages", bearer(revoked.Token), "{}", 401, "gateway token revoked"},
		{"no key", "POST", "/nokey/v1/chat/completions", bearer(nokey.Token), "{}", 502, "gateway holds no key for provider nokey"},
		{"model not allowed", "POST", "/anthropic/v1/messages", bearer(modelTok.Token), `{"model":"claude-big","max_tokens":1}`, 403, "token not valid for model claude-big"},
		{"model with a newline", "POST", "/anthropic/v1/messages", bearer(modelTok.Token), `{"model":"x\ny"}`, 403, "token not valid for model x%0Ay"},
		{"model missing", "POST", "/anthropic/v1/messages", bearer(modelTok.Token), `{"max_tokens":1}`, 403, "token not valid for model (none)"},
		{"model body not JSON", "POST", "/anthropic/v1/messages", bearer(modelTok.Token), `model=claude-ok`, 400, "request body cannot be checked: not JSON"},
		{"gemini model not allowed", "POST", "/gemini/v1beta/models/gemini-big:generateContent", bearer(modelTok.Token), "{}", 403, "token not valid for model gemini-big"},
		{"admin path on data port", "POST", "/v1/gateway/tokens", bearer(anth.Token), `{"providers":["anthropic"]}`, 404, "404 page not found"},
		{"admin revoke path on data port", "POST", "/v1/gateway/tokens/" + anth.JTI + "/revoke", nil, "", 404, "404 page not found"},
		// Check order.
		{"order: scope before revoked", "POST", "/openai/v1/chat/completions", bearer(revoked.Token), "{}", 403, "token not valid for provider openai"},
		{"order: revoked before no key", "POST", "/nokey/v1/chat/completions", bearer(revoked.Token), "{}", 401, "gateway token revoked"},
		{"order: invalid before scope", "POST", "/openai/v1/chat/completions", bearer(expired), "{}", 401, "invalid gateway token: expired"},
		{"order: provider before token", "POST", "/nope/x", bearer("garbage"), "{}", 404, "unknown provider nope"},
	}
	before := map[string]int{}
	for p, u := range e.up {
		before[p] = len(u.requests())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := e.do(t, tt.method, tt.path, tt.hdr, tt.body)
			if code != tt.status || strings.TrimSuffix(body, "\n") != tt.text {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, code, body, tt.status, tt.text)
			}
			if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type = %q, want text/plain", ct)
			}
			if sr := hdr.Values("X-Should-Retry"); len(sr) != 1 || sr[0] != "false" {
				t.Errorf("X-Should-Retry = %q, want [false]: a permanent refusal is not retryable", sr)
			}
		})
	}
	for p, u := range e.up {
		if n := len(u.requests()); n != before[p] {
			t.Errorf("upstream %s saw %d refused requests; a refused request must not be proxied", p, n-before[p])
		}
	}
}

func TestRefusalStatusCodes(t *testing.T) {
	tests := []struct {
		err    error
		status int
	}{
		{fmt.Errorf("%w x", ErrUnknownProvider), 404},
		{ErrMissingToken, 401},
		{ErrTokenExpired, 401},
		{ErrTokenConflict, 401},
		{fmt.Errorf("%w x", ErrProviderScope), 403},
		{fmt.Errorf("%w x", ErrModelScope), 403},
		{ErrRevoked, 401},
		{fmt.Errorf("%w x: files", ErrPathNotAllowed), 403},
		{fmt.Errorf("%w x", ErrNoProviderKey), 502},
		{ErrUpstream, 502},
		{ErrUpstreamTimeout, 504},
		{errors.New("something else with sk-secret"), 500},
	}
	for _, tt := range tests {
		status, text := refusalFor(tt.err)
		if status != tt.status {
			t.Errorf("refusalFor(%v) status = %d, want %d", tt.err, status, tt.status)
		}
		if status != 500 && text != tt.err.Error() {
			t.Errorf("refusalFor(%v) text = %q", tt.err, text)
		}
		if status == 500 && text != "internal error" {
			t.Errorf("refusalFor(foreign error) text = %q, want fixed text", text)
		}
	}
}

func TestHTTPStatusFor(t *testing.T) {
	for err, want := range map[error]int{
		nil: 200, ErrNotFound: 404, ErrBadGrant: 400, ErrCannotMint: 503, ErrTokenMalformed: 401,
		fmt.Errorf("x: %w", ErrModelScope): 403, errors.New("other"): 500,
	} {
		if got := HTTPStatusFor(err); got != want {
			t.Errorf("HTTPStatusFor(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestInjection(t *testing.T) {
	e := newEnv(t)
	all := e.mint(t, Grant{Providers: []string{"anthropic", "openai", "gemini", "compat"}}).Token
	tests := []struct {
		name      string
		path      string
		hdr       map[string]string
		provider  string
		wantPath  string
		wantQuery string
		wantHdr   string // header the real key must be in
		wantVal   string
		keepHdr   map[string]string // headers passed through unchanged
	}{
		{"anthropic via x-api-key", "/anthropic/v1/messages", map[string]string{"x-api-key": all, "anthropic-version": "2023-06-01", "anthropic-beta": "b1"},
			"anthropic", "/v1/messages", "", "X-Api-Key", realKeys["anthropic"], map[string]string{"Anthropic-Version": "2023-06-01", "Anthropic-Beta": "b1"}},
		{"anthropic via bearer", "/anthropic/v1/messages?beta=true", map[string]string{"Authorization": "Bearer " + all, "anthropic-version": "2023-06-01"},
			"anthropic", "/v1/messages", "beta=true", "X-Api-Key", realKeys["anthropic"], map[string]string{"Anthropic-Version": "2023-06-01"}},
		{"openai via bearer", "/openai/v1/chat/completions", map[string]string{"Authorization": "Bearer " + all, "OpenAI-Organization": "org-1"},
			"openai", "/v1/chat/completions", "", "Authorization", "Bearer " + realKeys["openai"], map[string]string{"Openai-Organization": "org-1"}},
		{"openai via upper-case X-API-KEY", "/openai/v1/models", map[string]string{"X-API-KEY": all},
			"openai", "/v1/models", "", "Authorization", "Bearer " + realKeys["openai"], nil},
		{"openai via lower-case authorization, bearer scheme any case", "/openai/v1/models", map[string]string{"authorization": "bEaReR " + all},
			"openai", "/v1/models", "", "Authorization", "Bearer " + realKeys["openai"], nil},
		{"gemini via x-goog-api-key", "/gemini/v1beta/models/gemini-2.0-flash:generateContent", map[string]string{"x-goog-api-key": all},
			"gemini", "/v1beta/models/gemini-2.0-flash:generateContent", "", "X-Goog-Api-Key", realKeys["gemini"], nil},
		{"gemini via key query parameter", "/gemini/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse&key=" + all, nil,
			"gemini", "/v1beta/models/gemini-2.0-flash:streamGenerateContent", "alt=sse", "X-Goog-Api-Key", realKeys["gemini"], nil},
		{"gemini via a percent-encoded key parameter name", "/gemini/v1beta/models/gemini-2.0-flash:generateContent?alt=sse&%6Bey=" + all, nil,
			"gemini", "/v1beta/models/gemini-2.0-flash:generateContent", "alt=sse", "X-Goog-Api-Key", realKeys["gemini"], nil},
		{"header token and a percent-encoded key parameter", "/gemini/v1beta/models?k%65y=" + all, map[string]string{"X-Goog-Api-Key": all},
			"gemini", "/v1beta/models", "", "X-Goog-Api-Key", realKeys["gemini"], nil},
		{"same token in three headers and the query", "/gemini/v1beta/models?key=" + all,
			map[string]string{"Authorization": "Bearer " + all, "x-api-key": all, "X-Goog-Api-Key": all, "api-key": all},
			"gemini", "/v1beta/models", "", "X-Goog-Api-Key", realKeys["gemini"], nil},
		{"compatible provider", "/compat/v1/chat/completions", map[string]string{"api-key": all},
			"compat", "/v1/chat/completions", "", "Authorization", "Bearer " + realKeys["compat"], nil},
		{"escaped path kept", "/openai/v1/files/a%2Fb/content", map[string]string{"Authorization": "Bearer " + all},
			"openai", "/v1/files/a/b/content", "", "Authorization", "Bearer " + realKeys["openai"], nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := e.do(t, "POST", tt.path, tt.hdr, `{"model":"x"}`)
			if code != 200 || body != `{"ok":true}` {
				t.Fatalf("POST %s = %d %q, want 200 from upstream", tt.path, code, body)
			}
			got := e.up[tt.provider].last(t)
			if got.Path != tt.wantPath || got.RawQuery != tt.wantQuery {
				t.Errorf("upstream saw %s?%s, want %s?%s", got.Path, got.RawQuery, tt.wantPath, tt.wantQuery)
			}
			if strings.Contains(tt.path, "%2F") && got.RawPath == "" {
				t.Errorf("upstream saw unescaped path %q, want %%2F kept", got.Path)
			}
			if want := strings.TrimPrefix(e.up[tt.provider].srv.URL, "http://"); got.Host != want {
				t.Errorf("upstream Host = %q, want %q", got.Host, want)
			}
			if vs := got.Header.Values(tt.wantHdr); len(vs) != 1 || vs[0] != tt.wantVal {
				t.Errorf("upstream %s = %q, want exactly [%q]", tt.wantHdr, vs, tt.wantVal)
			}
			for _, h := range credentialHeaders {
				if h != tt.wantHdr && len(got.Header.Values(h)) > 0 {
					t.Errorf("upstream saw client credential header %s", h)
				}
			}
			for k, vs := range got.Header {
				for _, v := range vs {
					if strings.Contains(v, all) {
						t.Errorf("upstream header %s holds the gateway token", k)
					}
				}
			}
			if strings.Contains(got.RawQuery, all) || strings.Contains(got.RawQuery, "key=") {
				t.Errorf("upstream query %q holds a key parameter", got.RawQuery)
			}
			for k, v := range tt.keepHdr {
				if got.Header.Get(k) != v {
					t.Errorf("upstream %s = %q, want %q passed through", k, got.Header.Get(k), v)
				}
			}
			if string(got.Body) != `{"model":"x"}` {
				t.Errorf("upstream body = %q", got.Body)
			}
		})
	}
}

// rawRequest sends a raw HTTP/1.1 request to addr and returns the response.
func rawRequest(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestConnectionHeaderCannotStripKey(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "openai", "gemini"}}).Token
	addr := strings.TrimPrefix(e.data.URL, "http://")
	tests := []struct{ provider, path, hdr, val string }{
		{"anthropic", "/anthropic/v1/messages", "X-Api-Key", realKeys["anthropic"]},
		{"openai", "/openai/v1/chat/completions", "Authorization", "Bearer " + realKeys["openai"]},
		{"gemini", "/gemini/v1beta/models/g:generateContent", "X-Goog-Api-Key", realKeys["gemini"]},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			req := "POST " + tt.path + " HTTP/1.1\r\nHost: gw\r\n" +
				"Authorization: Bearer " + tok + "\r\n" +
				"Connection: keep-alive, x-api-key, authorization, x-goog-api-key, X-Api-Key\r\n" +
				"Content-Length: 2\r\n\r\n{}"
			resp, body := rawRequest(t, addr, req)
			if resp.StatusCode != 200 {
				t.Fatalf("status = %d %q, want 200", resp.StatusCode, body)
			}
			got := e.up[tt.provider].last(t)
			if vs := got.Header.Values(tt.hdr); len(vs) != 1 || vs[0] != tt.val {
				t.Errorf("upstream %s = %q, want the injected key", tt.hdr, vs)
			}
		})
	}
}

func TestUpgradeNotForwarded(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	addr := strings.TrimPrefix(e.data.URL, "http://")
	for _, up := range []string{"websocket", "h2c"} {
		t.Run(up, func(t *testing.T) {
			e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Upgrade") != "" {
					// What a real upgrading upstream would do.
					w.Header().Set("Connection", "Upgrade")
					w.Header().Set("Upgrade", r.Header.Get("Upgrade"))
					w.WriteHeader(http.StatusSwitchingProtocols)
					return
				}
				io.WriteString(w, "plain")
			})
			req := "GET /openai/v1/realtime HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + tok + "\r\n" +
				"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: " + up + "\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n" +
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
			resp, body := rawRequest(t, addr, req)
			if resp.StatusCode == http.StatusSwitchingProtocols {
				t.Fatal("gateway switched protocols")
			}
			got := e.up["openai"].last(t)
			if got.Header.Get("Upgrade") != "" || got.Header.Get("Connection") != "" || got.Header.Get("Http2-Settings") != "" {
				t.Errorf("upstream saw Upgrade=%q Connection=%q HTTP2-Settings=%q, want none",
					got.Header.Get("Upgrade"), got.Header.Get("Connection"), got.Header.Get("Http2-Settings"))
			}
			if resp.StatusCode != 200 || body != "plain" {
				t.Errorf("response = %d %q, want the plain upstream answer", resp.StatusCode, body)
			}
		})
	}
}

// readWithin reads one line from r or fails after d.
func readWithin(t *testing.T, r *bufio.Reader, d time.Duration) (string, error) {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{s, err}
	}()
	select {
	case x := <-ch:
		return x.s, x.err
	case <-time.After(d):
		t.Fatalf("no data within %v", d)
		return "", nil
	}
}

func TestSSEStreamsUnbuffered(t *testing.T) {
	for _, gzip := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gzip), func(t *testing.T) {
			e := newEnv(t)
			tok := e.mint(t, Grant{Providers: []string{"anthropic"}}).Token
			const events = 5
			release := make(chan struct{})
			upstreamGone := make(chan error, 1)
			e.up["anthropic"].setHandler(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				w.WriteHeader(200)
				for i := 0; i < events; i++ {
					if i > 0 {
						select {
						case <-release: // the client has read event i-1
						case <-r.Context().Done():
							upstreamGone <- context.Cause(r.Context())
							return
						case <-time.After(30 * time.Second):
							upstreamGone <- errors.New("not released within 30 s")
							return
						}
					}
					fmt.Fprintf(w, "event: content_block_delta\ndata: {\"i\":%d}\n\n", i)
					w.(http.Flusher).Flush()
				}
			})
			req, _ := http.NewRequest("POST", e.data.URL+"/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
			req.Header.Set("x-api-key", tok)
			if gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("response = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			br := bufio.NewReader(resp.Body)
			for i := 0; i < events; i++ {
				// The upstream sends event i+1 only after we release it, so
				// each event must arrive on its own.
				var ev strings.Builder
				for {
					line, err := readWithin(t, br, 3*time.Second)
					if err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
					ev.WriteString(line)
					if line == "\n" {
						break
					}
				}
				want := fmt.Sprintf("event: content_block_delta\ndata: {\"i\":%d}\n\n", i)
				if ev.String() != want {
					t.Fatalf("event %d = %q, want %q", i, ev.String(), want)
				}
				if i < events-1 {
					select {
					case release <- struct{}{}:
					case err := <-upstreamGone:
						t.Fatalf("upstream handler ended before event %d: %v", i+1, err)
					}
				}
			}
			if rest, _ := io.ReadAll(br); len(rest) != 0 {
				t.Errorf("trailing bytes %q", rest)
			}
		})
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	done := make(chan struct{})
	e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(done)
		case <-time.After(10 * time.Second):
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, _ := readWithin(t, br, 3*time.Second); line != "data: first\n" {
		t.Fatalf("first line = %q", line)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request was not cancelled after the client disconnected")
	}
	eventually(t, "in-flight set to drain", func() bool {
		e.g.inflight.mu.Lock()
		defer e.g.inflight.mu.Unlock()
		return len(e.g.inflight.m) == 0
	})
}

func TestModelsAllowList(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "openai", "gemini"}, Models: []string{"claude-ok", "gpt-ok", "gemini-ok"}}).Token
	open := e.mint(t, Grant{Providers: []string{"anthropic"}}).Token
	big := `{"model":"claude-ok","messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`
	tests := []struct {
		name, tok, path, body string
		status                int
	}{
		{"anthropic allowed", tok, "/anthropic/v1/messages", `{"max_tokens":5,"model":"claude-ok"}`, 200},
		{"anthropic large body allowed", tok, "/anthropic/v1/messages", big, 200},
		{"openai allowed", tok, "/openai/v1/chat/completions", `{"model":"gpt-ok"}`, 200},
		{"openai other", tok, "/openai/v1/chat/completions", `{"model":"gpt-big"}`, 403},
		{"gemini allowed", tok, "/gemini/v1beta/models/gemini-ok:streamGenerateContent", `{}`, 200},
		{"gemini model info", tok, "/gemini/v1beta/models/gemini-ok", ``, 200},
		{"gemini list (no model)", tok, "/gemini/v1beta/models", ``, 403},
		{"no allow-list: any model", open, "/anthropic/v1/messages", `{"model":"anything"}`, 200},
		{"duplicate model key", tok, "/anthropic/v1/messages", `{"model":"claude-ok","model":"claude-big"}`, 403},
		{"case-variant model key", tok, "/openai/v1/chat/completions", `{"model":"gpt-ok","MODEL":"gpt-big"}`, 403},
		{"escaped model key", tok, "/openai/v1/chat/completions", `{"mod\u0065l":"gpt-ok"}`, 200},
		{"nested model ignored", tok, "/openai/v1/chat/completions", `{"extra":{"model":"gpt-big"},"model":"gpt-ok"}`, 200},
		{"trailing JSON", tok, "/openai/v1/chat/completions", `{"model":"gpt-ok"}{"model":"gpt-big"}`, 400},
		{"gemini dot segments", tok, "/gemini/v1beta/models/gemini-ok:generateContent/../../models/gemini-big:generateContent", `{}`, 403},
		{"gemini two model segments", tok, "/gemini/v1beta/models/gemini-ok/models/gemini-big:generateContent", `{}`, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := e.do(t, "POST", tt.path, bearer(tt.tok), tt.body)
			if code != tt.status {
				t.Fatalf("POST %s = %d %q, want %d", tt.path, code, body, tt.status)
			}
			// A path no rule admits (a model name segment with ":"
			// before its end) is refused before the model is looked at.
			if code == 403 && !strings.HasPrefix(body, "token not valid for model ") && !strings.HasPrefix(body, "path not allowed for provider gemini: models") {
				t.Errorf("refusal = %q", body)
			}
			if code == 200 {
				prov := strings.Split(tt.path, "/")[1]
				if got := e.up[prov].last(t).Body; string(got) != tt.body {
					t.Errorf("upstream body has %d bytes, want the %d sent", len(got), len(tt.body))
				}
			}
		})
	}
}

func TestRequestPath(t *testing.T) {
	tests := []struct{ in, name, rest, rawRest string }{
		{"/anthropic/v1/messages", "anthropic", "/v1/messages", ""},
		{"/anthropic", "anthropic", "", ""},
		{"/anthropic/", "anthropic", "/", ""},
		{"/openai/v1/files/a%2Fb", "openai", "/v1/files/a/b", "/v1/files/a%2Fb"},
		{"/anthropic/../openai/v1/x", "openai", "/v1/x", ""},
		{"/gemini/v1beta/./models/m/../../models/n:g", "gemini", "/v1beta/models/n:g", ""},
		{"/gemini/v1beta/%2e%2e/x/", "gemini", "/x/", ""},
		{"/../../etc/passwd", "etc", "/passwd", ""},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		name, rest, rawRest := requestPath(u)
		if name != tt.name || rest != tt.rest || rawRest != tt.rawRest {
			t.Errorf("requestPath(%q) = %q, %q, %q; want %q, %q, %q", tt.in, name, rest, rawRest, tt.name, tt.rest, tt.rawRest)
		}
	}
}

func TestUpstreamFailures(t *testing.T) {
	deadURL := deadUpstream(t)
	e := newEnv(t, func(o *Options) {
		o.Providers["openai"] = ProviderConfig{BaseURL: deadURL}
		o.ResponseHeaderTimeout = 100 * time.Millisecond
	})
	e.up["anthropic"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "openai"}}).Token
	tests := []struct {
		name, path string
		status     int
		text       string
	}{
		{"connection refused", "/openai/v1/chat/completions", 502, "upstream unavailable\n"},
		{"no response headers in time", "/anthropic/v1/messages", 504, "upstream timeout\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := e.do(t, "POST", tt.path, bearer(tok), "{}")
			if code != tt.status || body != tt.text || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
				t.Errorf("POST %s = %d %q, want %d %q", tt.path, code, body, tt.status, tt.text)
			}
			if sr, ok := hdr["X-Should-Retry"]; ok {
				t.Errorf("X-Should-Retry = %q on an upstream failure, want none (the SDK may retry)", sr)
			}
		})
	}
	logs := e.logs.String()
	for _, s := range []string{deadURL, strings.TrimPrefix(deadURL, "http://"), e.up["anthropic"].srv.URL} {
		if strings.Contains(logs, s) {
			t.Errorf("logs hold the upstream address %s", s)
		}
	}
}

// TestCanary runs successful and failing requests with a canary key and
// a canary token and checks neither appears in any response or log line.
func TestCanary(t *testing.T) {
	const canaryKey = "sk-CANARY-KEY-7f3a9b1c5e"
	deadURL := deadUpstream(t)
	e := newEnv(t, func(o *Options) { o.Providers["gemini"] = ProviderConfig{BaseURL: deadURL} })
	for _, p := range []string{"anthropic", "openai", "gemini", "compat"} {
		e.writeKey(t, p, canaryKey)
	}
	eventually(t, "canary keys", func() bool { return e.g.keys.get("openai") == canaryKey && e.g.keys.get("compat") == canaryKey })
	m := e.mintHTTP(t, `{"providers":["anthropic","openai","gemini","compat"],"models":["ok-model","g"],"run_id":"canary"}`)
	canaryToken := m.Token
	// Upstreams that echo what they were sent, in headers and bodies.
	echo := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Echo-Key", r.Header.Get("X-Api-Key")+r.Header.Get("Authorization"))
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s %s"}}`, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
		}
	}
	e.up["anthropic"].setHandler(echo(401))
	e.up["openai"].setHandler(echo(400))

	var responses []string
	record := func(code int, hdr http.Header, body string) {
		var sb strings.Builder
		fmt.Fprintf(&sb, "%d\n", code)
		hdr.Write(&sb)
		sb.WriteString(body)
		responses = append(responses, sb.String())
	}
	reqs := []struct {
		method, path string
		hdr          map[string]string
		body         string
	}{
		{"POST", "/anthropic/v1/messages", map[string]string{"x-api-key": canaryToken}, `{"model":"ok-model"}`},
		{"POST", "/openai/v1/chat/completions", bearer(canaryToken), `{"model":"ok-model"}`},
		{"POST", "/openai/v1/chat/completions", bearer(canaryToken), `{"model":"bad-model"}`},
		{"POST", "/gemini/v1beta/models/g:generateContent?key=" + canaryToken, nil, `{}`},
		{"POST", "/compat/v1/chat/completions", bearer(canaryToken), `{"model":"ok-model"}`},
		{"POST", "/nokey/v1/x", bearer(canaryToken), `{}`},
		{"POST", "/unknown/v1/x", bearer(canaryToken), `{}`},
		{"POST", "/anthropic/v1/messages", map[string]string{"x-api-key": canaryToken, "Authorization": "Bearer other"}, `{}`},
		{"POST", "/anthropic/v1/messages", bearer(canaryToken + "x"), `{}`},
		{"POST", "/anthropic/v1/messages", bearer(canaryToken[:len(canaryToken)/2]), `{}`},
	}
	for _, r := range reqs {
		record(e.do(t, r.method, r.path, r.hdr, r.body))
	}
	if code := e.revokeHTTP(t, m.JTI); code != 204 {
		t.Fatal(code)
	}
	record(e.do(t, "POST", "/anthropic/v1/messages", bearer(canaryToken), `{"model":"ok-model"}`))

	logs := e.logs.String()
	for _, secret := range []string{canaryKey, canaryToken} {
		for i, r := range responses {
			if strings.Contains(r, secret) {
				t.Errorf("response %d holds a secret:\n%s", i, r)
			}
		}
		if strings.Contains(logs, secret) {
			t.Errorf("logs hold a secret:\n%s", logs)
		}
	}
	if strings.Contains(strings.Join(responses, "\n"), deadURL) || strings.Contains(logs, strings.TrimPrefix(deadURL, "http://")) {
		t.Error("a response or log line holds the upstream URL")
	}
	if !strings.Contains(responses[0], redacted) {
		t.Errorf("echoing upstream's body not redacted: %s", responses[0])
	}
	if !strings.Contains(logs, "gateway request refused") || !strings.Contains(logs, "upstream request failed") {
		t.Errorf("expected refusal and upstream failure log lines, got:\n%s", logs)
	}
}

func TestNew(t *testing.T) {
	key := newKey(t)
	base := func() Options { return Options{Store: newMemStore(), SigningKey: key} }
	tests := []struct {
		name string
		mod  func(*Options)
	}{
		{"no store", func(o *Options) { o.Store = nil }},
		{"no keys at all", func(o *Options) { o.SigningKey = nil }},
		{"short HMAC secret", func(o *Options) { o.HMACSecret = []byte("short") }},
		{"negative leeway", func(o *Options) { o.Leeway = -time.Second }},
		{"negative poll", func(o *Options) { o.PollInterval = -time.Second }},
		{"bad provider name", func(o *Options) { o.Providers = map[string]ProviderConfig{"Bad/Name": {BaseURL: "http://x"}} }},
		{"custom provider without URL", func(o *Options) { o.Providers = map[string]ProviderConfig{"groq": {}} }},
		{"bad kind", func(o *Options) {
			o.Providers = map[string]ProviderConfig{"groq": {BaseURL: "https://x", Kind: "cohere"}}
		}},
		{"URL with query", func(o *Options) { o.Providers = map[string]ProviderConfig{"groq": {BaseURL: "https://x/?a=b"}} }},
		{"store down", func(o *Options) { o.Store = &memStore{tokens: map[string]TokenRecord{}, listErr: errors.New("down")} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.mod(&o)
			if g, err := New(context.Background(), o); err == nil {
				g.Close()
				t.Errorf("New(%s) = nil error", tt.name)
			}
		})
	}
	// A verify-only replica cannot mint.
	g, err := New(context.Background(), Options{Store: newMemStore(), VerifyKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Mint(context.Background(), Grant{Providers: []string{"openai"}}); !errors.Is(err, ErrCannotMint) {
		t.Errorf("Mint on a verify-only gateway = %v, want ErrCannotMint", err)
	}
	if g.providers["anthropic"].base.Host != "api.anthropic.com" || g.providers["gemini"].kind != KindGemini {
		t.Error("default providers missing")
	}
}

func FuzzExtractToken(f *testing.F) {
	f.Add("Bearer abc", "", "", "")
	f.Add("Bearer abc", "abc", "abc", "key=abc")
	f.Add("bearer abc", "def", "", "")
	f.Add("", "", "", "key=a&key=b")
	f.Add("Basic abc", "", "", "alt=sse")
	f.Add("Bearer", " ", "\t", "key=%zz;key=x")
	f.Fuzz(func(t *testing.T, auth, xkey, gkey, query string) {
		h := http.Header{}
		if auth != "" {
			h["authorization"] = []string{auth}
		}
		if xkey != "" {
			h["X-API-KEY"] = []string{xkey}
		}
		if gkey != "" {
			h.Set("X-Goog-Api-Key", gkey)
		}
		tok, err := extractToken(h, query, false)
		switch {
		case errors.Is(err, ErrMissingToken), errors.Is(err, ErrTokenConflict):
			if tok != "" {
				t.Fatalf("extractToken returned %q with %v", tok, err)
			}
		case err != nil:
			t.Fatalf("extractToken error %v", err)
		default:
			if tok == "" || tok != strings.TrimSpace(tok) {
				t.Fatalf("extractToken = %q", tok)
			}
			if !strings.Contains(auth, tok) && !strings.Contains(xkey, tok) && !strings.Contains(gkey, tok) && !strings.Contains(query, "key=") {
				t.Fatalf("extractToken = %q, not among the inputs", tok)
			}
			// Every non-empty credential present equals tok.
			for _, v := range []string{strings.TrimSpace(xkey), strings.TrimSpace(gkey)} {
				if v != "" && v != tok {
					t.Fatalf("extractToken = %q, but %q was also presented", tok, v)
				}
			}
		}
	})
}

// TestMethodsRefused: TRACE (the upstream would echo the injected key),
// OPTIONS and unknown methods are refused before any token check or
// upstream call.
func TestMethodsRefused(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"anthropic"}}).Token
	for _, m := range []string{"TRACE", "OPTIONS", "PROPFIND"} {
		status, hdr, body := e.do(t, m, "/anthropic/v1/messages", map[string]string{"X-Api-Key": tok}, "")
		if status != http.StatusMethodNotAllowed || strings.Contains(body, realKeys["anthropic"]) {
			t.Errorf("%s = %d %q, want 405 without the key", m, status, body)
		}
		if sr := hdr.Get("X-Should-Retry"); sr != "false" {
			t.Errorf("%s: X-Should-Retry = %q, want false", m, sr)
		}
	}
	if n := len(e.up["anthropic"].requests()); n != 0 {
		t.Errorf("upstream saw %d requests, want 0", n)
	}
}
