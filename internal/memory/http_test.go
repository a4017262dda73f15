package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

const base = "/v1/memory/agents/run-1"

func TestRememberHTTP(t *testing.T) {
	e := newEnv(t, memory.Options{MaxTextBytes: 64})
	key := e.key("agents", "run-1", "pod-a")
	first := e.do("POST", base+"/memories", key, `{"kind":"preference","key":"color","text":"blue","tags":["ui"]}`)
	if first.status != http.StatusCreated || first.str("status") != "created" || first.str("id") == "" {
		t.Fatalf("POST memories(blue) = %d %s, want 201 created", first.status, first.raw)
	}
	if m := first.body["memory"].(map[string]any); m["session"] != "pod-a" || m["text"] != "blue" {
		t.Errorf("POST memories(blue) memory = %v, want session pod-a, text blue", m)
	}
	tests := []struct {
		name       string
		body       string
		status     int
		code       string // "error" for refusals, "status" for successes
		supersedes string
	}{
		{"same again", `{"kind":"preference","key":"color","text":"blue"}`, 200, "unchanged", ""},
		{"supersede", `{"kind":"preference","key":"color","text":"green"}`, 200, "superseded", first.str("id")},
		{"no key", `{"kind":"fact","text":"blue"}`, 201, "created", ""},
		{"bad kind", `{"kind":"Pref","text":"x"}`, 400, "bad_request", ""},
		{"kind too long", `{"kind":"` + strings.Repeat("k", 33) + `","text":"x"}`, 400, "bad_request", ""},
		{"empty text", `{"kind":"fact","text":"  "}`, 400, "bad_request", ""},
		{"key too long", `{"kind":"fact","key":"` + strings.Repeat("k", 257) + `","text":"x"}`, 400, "bad_request", ""},
		{"too many tags", `{"kind":"fact","text":"x","tags":` + jsonString(make([]string, 17)) + `}`, 400, "bad_request", ""},
		{"tag too long", `{"kind":"fact","text":"x","tags":["` + strings.Repeat("t", 65) + `"]}`, 400, "bad_request", ""},
		{"bad json", `{"kind":"fact","text":`, 400, "bad_request", ""},
		{"unknown field", `{"kind":"fact","text":"x","txet":"y"}`, 400, "bad_request", ""},
		{"two objects", `{"kind":"fact","text":"x"}{}`, 400, "bad_request", ""},
		{"invalid utf-8", "{\"kind\":\"fact\",\"text\":\"\xff\xfe\"}", 400, "bad_request", ""},
		{"text over limit", `{"kind":"fact","text":"` + strings.Repeat("é", 33) + `"}`, 413, "too_large", ""},
		{"body over bound", `{"kind":"fact","text":"` + strings.Repeat("x", 100<<10) + `"}`, 413, "too_large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.memories("agents", "run-1"))
			e.clock.Advance(time.Millisecond)
			r := e.do("POST", base+"/memories", key, tt.body)
			if r.status != tt.status {
				t.Fatalf("POST memories(%.60s) = %d %s, want %d", tt.body, r.status, r.raw, tt.status)
			}
			if r.status >= 400 {
				if got := r.str("error"); got != tt.code {
					t.Errorf("POST memories(%.60s) error = %q, want %q", tt.body, got, tt.code)
				}
				if after := len(e.memories("agents", "run-1")); after != before {
					t.Errorf("POST memories(%.60s) stored %d memories, want 0", tt.body, after-before)
				}
				if tt.status == 413 && r.num("limit_bytes") != 64 {
					t.Errorf("POST memories(%.60s) limit_bytes = %v, want 64", tt.body, r.body["limit_bytes"])
				}
				return
			}
			if got := r.str("status"); got != tt.code {
				t.Errorf("POST memories(%.60s) status = %q, want %q", tt.body, got, tt.code)
			}
			if got := r.str("supersedes"); got != tt.supersedes {
				t.Errorf("POST memories(%.60s) supersedes = %q, want %q", tt.body, got, tt.supersedes)
			}
		})
	}
	// History keeps the superseded value.
	r := e.do("GET", base+"/memories?kind=preference&history=true", key, "")
	ms := r.body["memories"].([]any)
	if len(ms) != 2 || ms[1].(map[string]any)["superseded_by"] == nil {
		t.Errorf("GET memories?history=true = %s, want green then superseded blue", r.raw)
	}
	r = e.do("GET", base+"/memories?kind=preference", key, "")
	if ms := r.body["memories"].([]any); len(ms) != 1 || ms[0].(map[string]any)["text"] != "green" {
		t.Errorf("GET memories?kind=preference = %s, want only green", r.raw)
	}
}

func TestRecallUnicode(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	texts := []string{
		"你好世界",
		"Пользователь предпочитает тёмную тему",
		"Un café au lait, s'il vous plaît",
		"ship it 🚀 after the 🎉 party 👩‍💻",
		"東京のオフィスで金曜日にデプロイする",
		"세계 최고의 커피",
		"plain ascii about databases",
	}
	ids := map[string]string{}
	for _, text := range texts {
		r := e.do("POST", base+"/memories", key, jsonString(map[string]string{"kind": "fact", "text": text}))
		if r.status != http.StatusCreated {
			t.Fatalf("POST memories(%q) = %d %s", text, r.status, r.raw)
		}
		ids[r.str("id")] = text
	}
	tests := []struct {
		q    string
		want string
	}{
		{"世界", "你好世界"},
		{"你好", "你好世界"},
		{"ТЁМНУЮ", "Пользователь предпочитает тёмную тему"},
		{"тему", "Пользователь предпочитает тёмную тему"},
		{"cafe", "Un café au lait, s'il vous plaît"},
		{"PLAIT", "Un café au lait, s'il vous plaît"},
		{"🎉", "ship it 🚀 after the 🎉 party 👩‍💻"},
		{"金曜日", "東京のオフィスで金曜日にデプロイする"},
		{"オフィス", "東京のオフィスで金曜日にデプロイする"},
		{"커피", "세계 최고의 커피"},
		{"database databases", "plain ascii about databases"},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			r := e.do("GET", base+"/memories?q="+url.QueryEscape(tt.q), key, "")
			if r.status != http.StatusOK {
				t.Fatalf("GET memories?q=%s = %d %s", tt.q, r.status, r.raw)
			}
			var body memory.RecallResponse
			if err := json.Unmarshal(r.raw, &body); err != nil {
				t.Fatal(err)
			}
			if len(body.Memories) == 0 || body.Memories[0].Text != tt.want {
				t.Errorf("GET memories?q=%s = %s, want first %q", tt.q, r.raw, tt.want)
			}
		})
	}
	// Every text comes back byte for byte.
	r := e.do("GET", base+"/memories?limit=100", key, "")
	var body memory.RecallResponse
	if err := json.Unmarshal(r.raw, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Memories) != len(texts) {
		t.Fatalf("GET memories = %d memories, want %d", len(body.Memories), len(texts))
	}
	for _, m := range body.Memories {
		if ids[m.ID] != m.Text {
			t.Errorf("memory %s text = %q, want %q", m.ID, m.Text, ids[m.ID])
		}
	}
}

func TestRecallQueries(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	for i := range 15 {
		kind := "fact"
		if i%3 == 0 {
			kind = "decision"
		}
		text := fmt.Sprintf("note %d about deploys", i)
		if i == 7 {
			text = "deploys deploys deploys on friday" // best BM25 match for "deploys friday"
		}
		e.clock.Advance(time.Second)
		if r := e.do("POST", base+"/memories", key, jsonString(map[string]string{"kind": kind, "text": text})); r.status != 201 {
			t.Fatalf("POST memories = %d %s", r.status, r.raw)
		}
	}
	tests := []struct {
		name   string
		query  string
		status int
		count  int
		first  string
	}{
		{"newest first, default limit", "", 200, 10, "note 14 about deploys"},
		{"limit", "?limit=3", 200, 3, "note 14 about deploys"},
		{"limit clamped to 100", "?limit=1000", 200, 15, "note 14 about deploys"},
		{"kind", "?kind=decision&limit=100", 200, 5, "note 12 about deploys"},
		{"bm25 first", "?q=deploys+friday", 200, 10, "deploys deploys deploys on friday"},
		{"no match", "?q=kubernetes", 200, 0, ""},
		{"limit zero", "?limit=0", 400, 0, ""},
		{"limit not a number", "?limit=ten", 400, 0, ""},
		{"bad kind", "?kind=BAD", 400, 0, ""},
		{"bad history", "?history=maybe", 400, 0, ""},
		{"query too long", "?q=" + strings.Repeat("a", 1025), 400, 0, ""},
		{"too many terms", "?q=" + strings.Repeat("a+", 33), 400, 0, ""},
	}
	// Queries that look like FTS5 syntax are only keywords.
	for _, q := range []string{`"`, `AND(`, `NEAR(a b)`, `*`, `text:x`, `a OR`, `-x`, `^x`, `'`, `)`, `{text}: y`, `""""`, `deploys"`} {
		tests = append(tests, struct {
			name   string
			query  string
			status int
			count  int
			first  string
		}{"syntax " + q, "?q=" + url.QueryEscape(q), 200, -1, ""})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", base+"/memories"+tt.query, key, "")
			if r.status != tt.status {
				t.Fatalf("GET memories%s = %d %s, want %d", tt.query, r.status, r.raw, tt.status)
			}
			if r.status != 200 || tt.count < 0 {
				return
			}
			var body memory.RecallResponse
			if err := json.Unmarshal(r.raw, &body); err != nil {
				t.Fatal(err)
			}
			if len(body.Memories) != tt.count {
				t.Errorf("GET memories%s = %d memories, want %d", tt.query, len(body.Memories), tt.count)
			}
			if tt.count > 0 && body.Memories[0].Text != tt.first {
				t.Errorf("GET memories%s first = %q, want %q", tt.query, body.Memories[0].Text, tt.first)
			}
		})
	}
}

func TestForgetHTTP(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	other := e.key("agents", "run-2", "pod-b")
	mine := e.do("POST", base+"/memories", key, `{"kind":"fact","text":"mine"}`).str("id")
	theirs := e.do("POST", "/v1/memory/agents/run-2/memories", other, `{"kind":"fact","text":"theirs"}`).str("id")
	tests := []struct {
		name   string
		id     string
		status int
	}{
		{"another namespace's memory", theirs, 404},
		{"malformed id", "xyz", 404},
		{"own memory", mine, 204},
		{"already forgotten", mine, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.do("DELETE", base+"/memories/"+tt.id, key, ""); r.status != tt.status {
				t.Errorf("DELETE memories/%s = %d %s, want %d", tt.id, r.status, r.raw, tt.status)
			}
		})
	}
	if n := len(e.memories("agents", "run-2")); n != 1 {
		t.Errorf("run-2 has %d memories, want 1", n)
	}
}

func TestNamespaceMismatchHTTP(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-2", "pod-b")
	routes := []struct{ method, path, body string }{
		{"POST", "/memories", `{"kind":"fact","text":"x"}`},
		{"GET", "/memories", ""},
		{"DELETE", "/memories/0000000000000001", ""},
		{"GET", "/state/plan", ""},
		{"PUT", "/state/plan", `{}`},
		{"POST", "/state/plan/lease", ""},
		{"DELETE", "/state/plan/lease", ""},
	}
	for _, ns := range []string{"/v1/memory/agents/run-1", "/v1/memory/other/run-2"} {
		for _, rt := range routes {
			t.Run(rt.method+" "+ns+rt.path, func(t *testing.T) {
				r := e.do(rt.method, ns+rt.path, key, rt.body, "Lease-Epoch: 1", "If-Match: *")
				if r.status != http.StatusForbidden || r.str("error") != "namespace_mismatch" {
					t.Errorf("%s %s = %d %s, want 403 namespace_mismatch", rt.method, ns+rt.path, r.status, r.raw)
				}
			})
		}
	}
	if n := len(e.memories("agents", "run-1")) + len(e.memories("other", "run-2")); n != 0 {
		t.Errorf("refused requests stored %d memories, want 0", n)
	}
	if _, err := e.db.GetWorkingState(context.Background(), memory.Namespace{Tenant: "agents", Agent: "run-1"}, "plan"); err == nil {
		t.Errorf("refused lease created a state slot")
	}
}

func TestUnauthenticatedHTTP(t *testing.T) {
	e := newEnv(t, memory.Options{})
	tests := []struct{ name, key string }{
		{"no key", ""},
		{"malformed key", "not-a-key"},
		{"unknown key", apikey.Prefix + strings.Repeat("A", 43)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.do("GET", base+"/memories", tt.key, ""); r.status != http.StatusUnauthorized {
				t.Errorf("GET memories with %s = %d, want 401", tt.name, r.status)
			}
		})
	}
	// The handler refuses a request that did not pass through the middleware.
	rec := httptest.NewRecorder()
	e.mem.Handler().ServeHTTP(rec, httptest.NewRequest("GET", base+"/memories", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("Handler() without middleware = %d, want 401", rec.Code)
	}
}

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
