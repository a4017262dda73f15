package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// TestMeteredBodiesCountAgainstTheHeldBudget: under a budget the meter
// reads a request's body whole (to estimate it and bound its output).
// That body counts against the gateway's held-body budget like the
// bodies read for the model or for provider-run tools: one sandbox's
// requests to a slow upstream, each of 12 MiB, are refused 503 busy
// past its share instead of each holding its body (before, with the
// provider's tools allowed so that nothing else read the body, all 24
// were let in and held ~24 x 12 MiB).
func TestMeteredBodiesCountAgainstTheHeldBudget(t *testing.T) {
	release := make(chan struct{})
	var reached atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		<-release
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer slow.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), &fakeProvider{srv: slow}, meteredOpts{providerTools: true, reserve: 16})
	budget := metering.Usage{Requests: 1000, InputTokens: 1 << 40, OutputTokens: 1 << 20}
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents", Agent: "a", Budget: budget})
	body := `{"model":"gpt-4o-mini","max_completion_tokens":16,"messages":[{"role":"user","content":"` + strings.Repeat("a", 12<<20) + `"}]}`
	client := &http.Client{}
	const n = 24
	var busy, other atomic.Int64
	settled := make(chan struct{}, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", mg.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				other.Add(1)
				settled <- struct{}{}
				return
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(msg), gateway.ErrBusy.Error()):
				busy.Add(1)
			case resp.StatusCode != http.StatusOK:
				other.Add(1)
				t.Errorf("a request = %s %q", resp.Status, strings.TrimSpace(string(msg)))
			}
			settled <- struct{}{}
		}()
	}
	// Every request either reaches the upstream (and waits there) or is
	// refused; a bound on a hang, not a speed target.
	deadline := time.After(90 * time.Second)
	for refused := int64(0); reached.Load()+refused < n; {
		select {
		case <-settled:
			refused++
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after 90 s: %d at the upstream, %d refused busy, %d otherwise", reached.Load(), busy.Load(), other.Load())
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d requests of 12 MiB: %d at the upstream, %d refused busy; heap in use %d MiB", n, reached.Load(), busy.Load(), ms.HeapInuse>>20)
	if busy.Load() == 0 || reached.Load() == 0 {
		t.Errorf("%d at the upstream, %d refused busy: want some of each (a sandbox's share of held bodies is one of the largest)", reached.Load(), busy.Load())
	}
}
