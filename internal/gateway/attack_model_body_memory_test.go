package gateway

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
)

// TestAttackModelBodyHeldPerRequest: with a models allow-list the gateway
// reads the whole request body (up to maxModelBody) into memory
// to find "model", and keeps it there while the upstream reads it. With
// no bound across requests (none per token, none in all), one sandbox
// that opens many requests to a slow upstream would hold a body per
// request in the process every tenant shares (memory, signer, gateway).
// 24 such requests must not hold ~24 x 12 MiB.
func TestAttackModelBodyHeldPerRequest(t *testing.T) {
	release := make(chan struct{})
	const n = 24
	settled := make(chan bool, 2*n) // true: reached the upstream; false: refused
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		settled <- true
		<-release // headers only; the body is left unread
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer slow.Close()
	e := newEnv(t, func(o *Options) {
		pc := o.Providers["openai"]
		pc.BaseURL = slow.URL
		o.Providers["openai"] = pc
		// What is measured is memory, not revocation: on 2 cores shared
		// with other packages' tests under -race the 20 ms poll can be
		// late by more than the default 2 s bound, and every request
		// would then be refused 503 stale rather than busy.
		o.MaxStaleness = time.Minute
	})
	// The bound on a hang is the select below (90 s), not the client's.
	e.client.Timeout = 0
	tok := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}}).Token
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 12<<20) + `"}]}`
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var done sync.WaitGroup
	var busy atomic.Int64
	var otherMu sync.Mutex
	var other []string // refusals and errors other than busy
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := e.client.Do(req)
			if err != nil {
				otherMu.Lock()
				other = append(other, err.Error())
				otherMu.Unlock()
				settled <- false
				return
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(msg), ErrBusy.Error()) {
					busy.Add(1)
				} else {
					otherMu.Lock()
					other = append(other, resp.Status+" "+strings.TrimSpace(string(msg)))
					otherMu.Unlock()
				}
				settled <- false
			}
		}()
	}
	reached := 0
	// A bound on a hang, not a speed target: under -race on 2 loaded
	// cores, reading the two 12 MiB bodies let in (for the model and for
	// provider-run tools) takes most of 20 s.
	timeout := time.After(90 * time.Second)
	for range n {
		select {
		case ok := <-settled:
			if ok {
				reached++
			}
		case <-timeout:
			t.Fatal("requests neither reached the upstream nor were refused within 90 s")
		}
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	close(release)
	done.Wait()
	held := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap held with %d requests sent, %d at the upstream, %d refused busy: %d MiB", n, reached, busy.Load(), held>>20)
	if len(other) > 0 {
		t.Errorf("%d requests neither reached the upstream nor were refused busy: %q", len(other), other)
	}
	if held > 128<<20 {
		t.Errorf("%d in-flight requests of one token hold %d MiB of request bodies in the gateway (no bound per token or in all)", n, held>>20)
	}
	// Every held body was given back (the handlers may return just after
	// their clients have the answer): the budget has room again.
	eventually(t, "every held body given back", func() bool {
		e.g.held.mu.Lock()
		defer e.g.held.mu.Unlock()
		return len(e.g.held.bytes) == 0
	})
	req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	go func() { <-settled }() // the upstream's arrival signal
	if resp, err := e.client.Do(req); err != nil {
		t.Errorf("a request after the others ended: %v", err)
	} else {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("a request after the others ended: %s %q, want 200 (the budget was not given back)", resp.Status, strings.TrimSpace(string(msg)))
		}
	}
	if reached == 0 || busy.Load() == 0 {
		t.Errorf("%d requests reached the upstream, %d were refused 503 busy: want some of each (maxHeldBodies %d MiB, bodies of 12 MiB)", reached, busy.Load(), maxHeldBodies>>20)
	}
}
