package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

func TestStateHTTP(t *testing.T) {
	e := newEnv(t, memory.Options{MaxStateBytes: 1024})
	a := e.key("agents", "run-1", "pod-a")
	b := e.key("agents", "run-1", "pod-b")
	const st = base + "/state/plan"
	epoch := func(n int64) string { return fmt.Sprintf("Lease-Epoch: %d", n) }
	steps := []struct {
		name    string
		method  string
		key     string
		body    string
		headers []string
		advance time.Duration
		status  int
		check   func(t *testing.T, r response)
	}{
		{name: "get before any write", method: "GET", key: a, status: 404},
		{name: "lease", method: "POST", key: a, status: 200, check: func(t *testing.T, r response) {
			if r.num("epoch") != 1 || r.num("version") != 0 || r.body["state"] != nil || r.str("expires_at") != "2026-10-12T09:05:00Z" {
				t.Errorf("lease = %s, want epoch 1, version 0, null state, 5 minute expiry", r.raw)
			}
		}},
		{name: "get leased but unwritten", method: "GET", key: a, status: 404},
		{name: "create", method: "PUT", key: a, body: `{"step":1,"name":"café ☕ 你好"}`, headers: []string{epoch(1), "If-Match: 0"}, status: 200, check: func(t *testing.T, r response) {
			if r.num("version") != 1 || r.header.Get("ETag") != `"1"` || r.str("updated_by") != "pod-a" {
				t.Errorf("put = %s (ETag %s), want version 1 by pod-a", r.raw, r.header.Get("ETag"))
			}
		}},
		{name: "quoted If-Match", method: "PUT", key: a, body: `[1,2,3]`, headers: []string{epoch(1), `If-Match: "1"`}, status: 200},
		{name: "stale version", method: "PUT", key: a, body: `{}`, headers: []string{epoch(1), "If-Match: 1"}, status: 412, check: func(t *testing.T, r response) {
			if r.str("error") != "version_conflict" || r.num("version") != 2 {
				t.Errorf("put = %s, want version_conflict with version 2", r.raw)
			}
		}},
		{name: "missing If-Match", method: "PUT", key: a, body: `{}`, headers: []string{epoch(1)}, status: 428},
		{name: "missing Lease-Epoch", method: "PUT", key: a, body: `{}`, headers: []string{"If-Match: *"}, status: 400},
		{name: "bad json", method: "PUT", key: a, body: `{"a":`, headers: []string{epoch(1), "If-Match: *"}, status: 400},
		{name: "too large", method: "PUT", key: a, body: `"` + strings.Repeat("x", 1024) + `"`, headers: []string{epoch(1), "If-Match: *"}, status: 413, check: func(t *testing.T, r response) {
			if r.str("error") != "too_large" || r.num("limit_bytes") != 1024 {
				t.Errorf("put = %s, want too_large with limit_bytes 1024", r.raw)
			}
		}},
		{name: "wrong epoch", method: "PUT", key: a, body: `{}`, headers: []string{epoch(2), "If-Match: *"}, status: 409, check: wantCode("lease_lost")},
		{name: "other session without lease", method: "PUT", key: b, body: `{}`, headers: []string{epoch(1), "If-Match: *"}, status: 409, check: wantCode("lease_lost")},
		{name: "get", method: "GET", key: b, status: 200, check: func(t *testing.T, r response) {
			lease, _ := r.body["lease"].(map[string]any)
			if r.num("version") != 2 || string(mustJSON(r.body["state"])) != `[1,2,3]` || lease["holder"] != "pod-a" || lease["epoch"] != 1.0 {
				t.Errorf("get = %s, want version 2, [1,2,3], lease by pod-a epoch 1", r.raw)
			}
		}},
		{name: "held by another", method: "POST", key: b, body: `{"ttl_seconds":60}`, status: 409, check: func(t *testing.T, r response) {
			if r.str("error") != "lease_held" || r.str("holder") != "pod-a" || r.str("expires_at") != "2026-10-12T09:05:00Z" {
				t.Errorf("lease = %s, want lease_held by pod-a until 09:05", r.raw)
			}
		}},
		{name: "renewal keeps epoch", method: "POST", key: a, body: `{"ttl_seconds":120}`, advance: time.Minute, status: 200, check: func(t *testing.T, r response) {
			if r.num("epoch") != 1 || r.str("expires_at") != "2026-10-12T09:03:00Z" || r.num("version") != 2 {
				t.Errorf("renew = %s, want epoch 1 until 09:03 at version 2", r.raw)
			}
		}},
		{name: "ttl over max", method: "POST", key: a, body: `{"ttl_seconds":3601}`, status: 400},
		{name: "negative ttl", method: "POST", key: a, body: `{"ttl_seconds":-1}`, status: 400},
		{name: "bad lease body", method: "POST", key: a, body: `{"ttl":1}`, status: 400},
		{name: "expired: another takes it", method: "POST", key: b, advance: 3 * time.Minute, status: 200, check: func(t *testing.T, r response) {
			if r.num("epoch") != 2 || string(mustJSON(r.body["state"])) != `[1,2,3]` {
				t.Errorf("lease = %s, want epoch 2 with state [1,2,3]", r.raw)
			}
		}},
		{name: "old holder fenced off", method: "PUT", key: a, body: `{}`, headers: []string{epoch(1), "If-Match: 2"}, status: 409, check: wantCode("lease_lost")},
		{name: "text/plain state", method: "PUT", key: b, body: "plain <text> \"quoted\"", headers: []string{epoch(2), "If-Match: 2", "Content-Type: text/plain; charset=utf-8"}, status: 200, check: func(t *testing.T, r response) {
			if r.body["state"] != "plain <text> \"quoted\"" || r.num("version") != 3 {
				t.Errorf("put = %s, want the text as a JSON string at version 3", r.raw)
			}
		}},
		{name: "release by non-holder", method: "DELETE", key: a, headers: []string{epoch(2)}, status: 409, check: wantCode("lease_lost")},
		{name: "release without epoch", method: "DELETE", key: b, status: 400},
		{name: "release", method: "DELETE", key: b, headers: []string{epoch(2)}, status: 204},
		{name: "release again", method: "DELETE", key: b, headers: []string{epoch(2)}, status: 409},
		{name: "epoch grows after release", method: "POST", key: a, status: 200, check: func(t *testing.T, r response) {
			if r.num("epoch") != 3 || r.num("version") != 3 {
				t.Errorf("lease = %s, want epoch 3 at version 3", r.raw)
			}
		}},
		{name: "bad name", method: "GET", key: a, status: 400},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			e.clock.Advance(s.advance)
			path := st
			if s.method == "POST" || s.method == "DELETE" {
				path += "/lease"
			}
			if s.name == "bad name" {
				path = base + "/state/..bad"
			}
			r := e.do(s.method, path, s.key, s.body, s.headers...)
			if r.status != s.status {
				t.Fatalf("%s %s = %d %s, want %d", s.method, path, r.status, r.raw, s.status)
			}
			if s.check != nil {
				s.check(t, r)
			}
		})
	}
	// The state round-trips byte for byte after the refused writes.
	got, err := e.db.GetWorkingState(context.Background(), memory.Namespace{Tenant: "agents", Agent: "run-1"}, "plan")
	if err != nil || got.Version != 3 || string(got.Value) != `"plain <text> \"quoted\""` {
		t.Errorf("GetWorkingState() = %d %s, %v, want version 3 with the text/plain value", got.Version, got.Value, err)
	}
}

func wantCode(code string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		t.Helper()
		if got := r.str("error"); got != code {
			t.Errorf("error = %q (%s), want %q", got, r.raw, code)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestStateRoundTripUnicode(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	const value = `{"note":"你好世界 Привет café 🎉👩‍💻","n":12345678901234567890}`
	if r := e.do("POST", base+"/state/u/lease", key, ""); r.status != 200 {
		t.Fatalf("lease = %d %s", r.status, r.raw)
	}
	if r := e.do("PUT", base+"/state/u", key, value, "Lease-Epoch: 1", "If-Match: 0"); r.status != 200 {
		t.Fatalf("put = %d %s", r.status, r.raw)
	}
	r := e.do("GET", base+"/state/u", key, "")
	var st struct {
		State json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(r.raw, &st); err != nil || string(st.State) != value {
		t.Errorf("GET state = %s, want state %s byte for byte", r.raw, value)
	}
}

func TestLeaseTakeover(t *testing.T) {
	tests := []struct {
		name        string
		holderAlive memory.HolderAliveFunc
		goneA       bool
		status      int
		epoch       int64
	}{
		{"holder alive", nil, false, 409, 0},
		{"holder gone", nil, true, 200, 2},
		{"holder check fails", func(context.Context, apikey.Identity) (bool, error) {
			return false, fmt.Errorf("apiserver down")
		}, true, 409, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, memory.Options{HolderAlive: tt.holderAlive})
			a := e.key("agents", "run-1", "pod-a")
			b := e.key("agents", "run-1", "pod-b")
			if r := e.do("POST", base+"/state/plan/lease", a, ""); r.status != 200 {
				t.Fatalf("lease(pod-a) = %d %s", r.status, r.raw)
			}
			if tt.goneA {
				e.setGone("pod-a")
			}
			r := e.do("POST", base+"/state/plan/lease", b, "")
			if r.status != tt.status || (tt.epoch != 0 && r.num("epoch") != tt.epoch) {
				t.Fatalf("lease(pod-b) = %d %s, want %d epoch %d", r.status, r.raw, tt.status, tt.epoch)
			}
			if r.status == 200 {
				// The old holder is fenced off.
				if r := e.do("PUT", base+"/state/plan", a, `{}`, "Lease-Epoch: 1", "If-Match: *"); r.status != 409 || r.str("error") != "lease_lost" {
					t.Errorf("put(pod-a, epoch 1) = %d %s, want 409 lease_lost", r.status, r.raw)
				}
			}
		})
	}
}

func TestConcurrentPutHTTP(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	if r := e.do("POST", base+"/state/plan/lease", key, ""); r.status != 200 {
		t.Fatalf("lease = %d %s", r.status, r.raw)
	}
	const n = 12
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("PUT", e.srv.URL+base+"/state/plan", strings.NewReader(fmt.Sprintf(`{"writer":%d}`, i)))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Lease-Epoch", "1")
			req.Header.Set("If-Match", "0")
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Errorf("PUT(writer %d) = %v", i, err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	if counts[200] != 1 || counts[412] != n-1 {
		t.Errorf("concurrent PUT statuses = %v, want one 200 and %d 412", counts, n-1)
	}
}
