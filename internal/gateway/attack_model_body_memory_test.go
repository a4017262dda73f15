package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAttackModelBodyHeldPerRequest: with a models allow-list the gateway
// reads the whole request body (up to maxModelBody, 16 MiB) into memory
// to find "model", and keeps it there while the upstream reads it. No
// bound applies across requests (none per token, none in all), so one
// sandbox that opens many requests to a slow upstream holds 16 MiB of the
// process per request: the process every tenant shares (memory, signer,
// gateway). 24 such requests must not hold ~24 x 12 MiB.
func TestAttackModelBodyHeldPerRequest(t *testing.T) {
	release := make(chan struct{})
	var arrived sync.WaitGroup
	const n = 24
	arrived.Add(n)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // headers only; the body is left unread
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer slow.Close()
	e := newEnv(t, func(o *Options) {
		pc := o.Providers["openai"]
		pc.BaseURL = slow.URL
		o.Providers["openai"] = pc
	})
	tok := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}}).Token
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 12<<20) + `"}]}`
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := e.client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	waited := make(chan struct{})
	go func() { arrived.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	close(release)
	done.Wait()
	held := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap held with %d requests in flight: %d MiB", n, held>>20)
	if held > 128<<20 {
		t.Errorf("%d in-flight requests of one token hold %d MiB of request bodies in the gateway (no bound per token or in all)", n, held>>20)
	}
}
