package gateway

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// pattern is n bytes that differ by position (a put-back that loses,
// repeats or reorders a chunk is seen).
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte((i/7)%26)
	}
	return b
}

// HELD: a body over the bound is put back whole and in order (what was
// read, then the rest), with and without a declared length, and the
// bytes read are counted until release, then given back. A body that
// declares a length over the bound is not read at all.
func TestAttack5HoldBodyPutBackExact(t *testing.T) {
	e := newEnv(t)
	src := pattern(maxModelBody + 12345)
	for _, cl := range []int64{int64(len(src)), -1} {
		r := httptest.NewRequest("POST", "/x", bytes.NewReader(src))
		r.ContentLength = cl
		b, release, err := e.g.holdBody(r, maxModelBody, "h")
		if err != nil || b != nil {
			t.Fatalf("over-bound body (cl %d): b %d bytes, err %v", cl, len(b), err)
		}
		want := int64(maxModelBody + 1)
		if cl >= 0 {
			want = 0 // declared over the bound: left unread
		}
		if n, _ := heldTotal(e.g); n != want {
			t.Errorf("cl %d: %d bytes counted while the put-back holds %d", cl, n, want)
		}
		got, _ := io.ReadAll(r.Body)
		if !bytes.Equal(got, src) || r.ContentLength != cl {
			t.Errorf("cl %d: put back %d bytes (equal %v), ContentLength %d", cl, len(got), bytes.Equal(got, src), r.ContentLength)
		}
		release()
		release() // twice: once
		if n, _ := heldTotal(e.g); n != 0 {
			t.Errorf("cl %d: %d bytes counted after release", cl, n)
		}
		if n := e.g.held.total(); n != 0 {
			t.Fatalf("cl %d: global budget not whole after release: %d held", cl, n)
		}
	}
}

// errAfter reads b then fails with err.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

// HELD: a body whose read fails is put back as read, then the error (it
// is not forwarded as if it had ended), is nil to the checks, and its
// bytes are given back.
func TestAttack5HoldBodyReadErrorPutBack(t *testing.T) {
	e := newEnv(t)
	boom := errors.New("client went away")
	r := httptest.NewRequest("POST", "/x", nil)
	r.Body = io.NopCloser(&errAfter{r: strings.NewReader(`{"model":"cheap-model"`), err: boom})
	r.ContentLength = -1
	b, release, err := e.g.holdBody(r, maxModelBody, "h")
	if err != nil || b != nil {
		t.Fatalf("failed read: b %q err %v", b, err)
	}
	got, rerr := io.ReadAll(r.Body)
	if string(got) != `{"model":"cheap-model"` || !errors.Is(rerr, boom) {
		t.Errorf("put back %q, %v", got, rerr)
	}
	release()
	if n, _ := heldTotal(e.g); n != 0 {
		t.Errorf("%d bytes counted after release", n)
	}
}

// HELD: through the proxy, a body over the bound is never forwarded
// where the whole body is needed: 413 for the tools check, refused for a
// model-scoped token on a provider whose tools are allowed; and with
// neither (tools allowed, no models list) it is forwarded byte for byte.
// Every refusal gives its bytes back.
func TestAttack5OverBoundThroughProxy(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		c := o.Providers["compat"]
		c.ProviderTools = true
		o.Providers["compat"] = c
	})
	big := `{"model":"cheap-model","x":"` + string(pattern(maxModelBody)) + `"}`
	scoped := e.mint(t, Grant{Providers: []string{"openai", "compat"}, Models: []string{"cheap-model"}, Tenant: "t", Agent: "a"}).Token
	free := e.mint(t, Grant{Providers: []string{"compat"}, Tenant: "t", Agent: "b"}).Token
	unscopedOpenAI := e.mint(t, Grant{Providers: []string{"openai"}, Tenant: "t", Agent: "c"}).Token
	if code, _, _ := e.do(t, "POST", "/openai/v1/chat/completions", bearer(unscopedOpenAI), big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("over-bound body, tools checked: %d, want 413", code)
	}
	waitHeldZero(t, e.g, "413")
	if code, _, _ := e.do(t, "POST", "/compat/v1/chat/completions", bearer(scoped), big); code == http.StatusOK {
		t.Errorf("over-bound body, model-scoped token: forwarded")
	}
	waitHeldZero(t, e.g, "model unknown")
	n := len(e.up["compat"].requests())
	if code, _, _ := e.do(t, "POST", "/compat/v1/chat/completions", bearer(free), big); code != http.StatusOK {
		t.Errorf("over-bound body, nothing to check: %d", code)
	}
	reqs := e.up["compat"].requests()
	if len(reqs) != n+1 || sha256.Sum256(reqs[len(reqs)-1].Body) != sha256.Sum256([]byte(big)) {
		t.Errorf("over-bound body with nothing to check not forwarded byte for byte")
	}
	waitHeldZero(t, e.g, "forwarded")
}

// HELD: refusals after the body was held (provider tool, model not
// allowed, no key, upstream down) and concurrent requests of several
// sandboxes all give their bytes back; the global budget is whole
// afterwards.
func TestAttack5HeldGivenBackOnEveryPath(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"openai", "nokey", "anthropic"}, Models: []string{"cheap-model"}, Tenant: "t", Agent: "a"}).Token
	e.up["anthropic"].srv.Close() // upstream down
	for _, c := range []struct{ path, body string }{
		{"/openai/v1/responses", `{"model":"cheap-model","tools":[{"type":"web_search"}]}`},
		{"/openai/v1/chat/completions", `{"model":"o1-pro"}`},
		{"/openai/v1/chat/completions", `{"model":"cheap-model","model":"cheap-model"}`},
		{"/nokey/v1/chat/completions", `{"model":"cheap-model"}`},
		{"/anthropic/v1/messages", `{"model":"cheap-model","max_tokens":1}`},
		{"/openai/v1/chat/completions", `{"model":"cheap-model"}`},
	} {
		code, _, _ := e.do(t, "POST", c.path, bearer(tok), c.body)
		t.Logf("%s %s: %d", c.path, c.body, code)
		waitHeldZero(t, e.g, c.path+" "+c.body)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"cheap-model"}, Tenant: "t", Agent: string(rune('a' + i%4))}).Token
			req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(`{"model":"cheap-model","x":"`+strings.Repeat("z", 1<<20)+`"}`))
			req.Header.Set("Authorization", "Bearer "+tk)
			if resp, err := e.client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	waitHeldZero(t, e.g, "32 concurrent requests")
	if n := e.g.held.total(); n != 0 {
		t.Fatalf("global budget not whole after every request ended: %d held", n)
	}
}
