package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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
			var body memory.RecallResult
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
	var body memory.RecallResult
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
		{"too many terms", "?q=" + distinctTerms(33), 400, 0, ""},
		{"a repeated term counts once", "?q=" + strings.Repeat("a+", 33), 200, 0, ""},
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
			var body memory.RecallResult
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

// distinctTerms is a query of n different terms ("t0+t1+...").
func distinctTerms(n int) string {
	terms := make([]string, n)
	for i := range terms {
		terms[i] = fmt.Sprintf("t%d", i)
	}
	return strings.Join(terms, "+")
}
