package memory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLogger routes slog to t.Logf.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimSuffix(p, []byte("\n")))
	return len(p), nil
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is a memory API served over loopback behind apikey's Middleware,
// on a real SQLite database.
type env struct {
	t     *testing.T
	db    *sqlite.DB
	keys  *apikey.Service
	mem   *memory.Service
	clock *clock
	srv   *httptest.Server

	mu   sync.Mutex
	gone map[string]bool // sessions whose pod HolderAlive reports gone
}

func newEnv(t *testing.T, opts memory.Options) *env {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	t.Cleanup(func() { db.Close() })
	log := testLogger(t)
	keys, err := apikey.New(apikey.Options{Store: db, Log: log})
	if err != nil {
		t.Fatalf("apikey.New() = %v", err)
	}
	e := &env{t: t, db: db, keys: keys, clock: &clock{now: time.Date(2026, 10, 12, 9, 0, 0, 0, time.UTC)}, gone: map[string]bool{}}
	opts.Store = db
	opts.Now = e.clock.Now
	opts.Log = log
	if opts.HolderAlive == nil {
		opts.HolderAlive = func(_ context.Context, h apikey.Identity) (bool, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return !e.gone[h.Session], nil
		}
	}
	e.mem, err = memory.New(opts)
	if err != nil {
		t.Fatalf("memory.New() = %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/memory/", keys.Middleware(e.mem.Handler()))
	mux.Handle("/mcp", e.mem.MCPHandler(keys.Verify))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) setGone(session string) {
	e.mu.Lock()
	e.gone[session] = true
	e.mu.Unlock()
}

// key mints a key for tenant/agent/session.
func (e *env) key(tenant, agent, session string) string {
	e.t.Helper()
	m, err := e.keys.Mint(context.Background(), apikey.Identity{Tenant: tenant, Agent: agent, Session: session, Method: "static"}, 0)
	if err != nil {
		e.t.Fatalf("Mint() = %v", err)
	}
	return m.Key
}

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r response) str(k string) string { s, _ := r.body[k].(string); return s }

func (r response) num(k string) int64 { f, _ := r.body[k].(float64); return int64(f) }

// do sends a request with key as bearer (none if empty) and headers as
// "Name: value" strings.
func (e *env) do(method, path, key, body string, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			e.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return r
}

// memories lists the memories of ns (history included) directly from the
// store.
func (e *env) memories(tenant, agent string) []memory.Memory {
	e.t.Helper()
	ms, err := e.db.RecallMemories(context.Background(), memory.Namespace{Tenant: tenant, Agent: agent}, memory.Query{Limit: 1000, History: true})
	if err != nil {
		e.t.Fatalf("RecallMemories() = %v", err)
	}
	return ms
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
