package gateway

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is an in-memory Store.
type memStore struct {
	mu      sync.Mutex
	tokens  map[string]TokenRecord
	revs    []Revocation
	seq     int64
	listErr error
	// lookupErr, if set, fails LookupToken; lookups counts the others.
	lookupErr error
	lookups   int
}

func newMemStore() *memStore { return &memStore{tokens: map[string]TokenRecord{}} }

func (m *memStore) RecordToken(_ context.Context, r TokenRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[r.JTI] = r
	return nil
}

func (m *memStore) RunTokens(_ context.Context, tenant, agent, run string, notBefore time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for jti, r := range m.tokens {
		if r.RunID == run && r.Tenant == tenant && r.Agent == agent && !r.ExpiresAt.Before(notBefore) {
			out = append(out, jti)
		}
	}
	return out, nil
}

func (m *memStore) LookupToken(_ context.Context, jti string) (TokenRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lookupErr != nil {
		return TokenRecord{}, m.lookupErr
	}
	m.lookups++
	r, ok := m.tokens[jti]
	if !ok {
		return TokenRecord{}, ErrNotFound
	}
	return r, nil
}

func (m *memStore) RevokeToken(_ context.Context, jti string, at time.Time) (Revocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.tokens[jti]
	if !ok {
		return Revocation{}, ErrNotFound
	}
	for _, rev := range m.revs {
		if rev.JTI == jti {
			return rev, nil
		}
	}
	m.seq++
	rev := Revocation{Seq: m.seq, JTI: jti, RevokedAt: at, ExpiresAt: r.ExpiresAt}
	m.revs = append(m.revs, rev)
	return rev, nil
}

func (m *memStore) ListRevocations(_ context.Context, since int64) ([]Revocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listErr != nil {
		return nil, m.listErr
	}
	var out []Revocation
	for _, r := range m.revs {
		if r.Seq > since {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *memStore) PruneExpired(_ context.Context, before time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	kept := m.revs[:0]
	for _, r := range m.revs {
		if r.ExpiresAt.Before(before) {
			n++
			continue
		}
		kept = append(kept, r)
	}
	m.revs = kept
	for jti, r := range m.tokens {
		if r.ExpiresAt.Before(before) {
			delete(m.tokens, jti)
			n++
		}
	}
	return n, nil
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// seen is one request an upstream received.
type seen struct {
	Method, Path, RawPath, RawQuery, Host string
	Header                                http.Header
	Body                                  []byte
}

// upstream is an httptest server standing in for a provider. It records
// every request; handler, if set, answers instead of the default 200.
type upstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	reqs    []seen
	handler http.HandlerFunc
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Host, r.Header.Clone(), body})
		h := u.handler
		u.mu.Unlock()
		if h != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) setHandler(h http.HandlerFunc) {
	u.mu.Lock()
	u.handler = h
	u.mu.Unlock()
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

func (u *upstream) last(t testing.TB) seen {
	t.Helper()
	r := u.requests()
	if len(r) == 0 {
		t.Fatal("upstream saw no request")
	}
	return r[len(r)-1]
}

// Real keys the test gateway holds.
var realKeys = map[string]string{
	"anthropic": "sk-ant-real-key-0001",
	"openai":    "sk-openai-real-key-0002",
	"gemini":    "AIza-gemini-real-key-0003",
	"compat":    "compat-real-key-0004",
}

// env is a gateway with upstreams for anthropic, openai, gemini and an
// OpenAI-compatible "compat" provider, and a "nokey" provider whose key
// file is missing.
type env struct {
	g       *Gateway
	store   *memStore
	key     ed25519.PrivateKey
	data    *httptest.Server
	admin   *httptest.Server
	up      map[string]*upstream
	keysDir string
	logs    *syncBuffer
	client  *http.Client
}

func newEnv(t testing.TB, mod ...func(*Options)) *env {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: newMemStore(), key: key, up: map[string]*upstream{}, keysDir: t.TempDir(), logs: &syncBuffer{}}
	providers := map[string]ProviderConfig{}
	for _, p := range []string{"anthropic", "openai", "gemini", "compat", "nokey"} {
		e.up[p] = newUpstream(t)
		// Every path: the tests of the path allow-list clear it.
		providers[p] = ProviderConfig{BaseURL: e.up[p].srv.URL, AllowPaths: []string{"/**"}}
		if k, ok := realKeys[p]; ok {
			e.writeKey(t, p, k+"\n")
		}
	}
	opts := Options{
		Store:        e.store,
		Providers:    providers,
		KeysDir:      e.keysDir,
		SigningKey:   key,
		PollInterval: 20 * time.Millisecond,
		Log:          slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range mod {
		f(&opts)
	}
	g, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	e.g = g
	e.data = httptest.NewServer(g.DataHandler())
	e.admin = httptest.NewServer(g.AdminHandler())
	tr := &http.Transport{DisableCompression: true}
	e.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		e.data.Close()
		e.admin.Close()
		g.Close()
	})
	return e
}

// writeKey replaces provider p's key file atomically, like a Secret
// update.
func (e *env) writeKey(t testing.TB, p, content string) {
	t.Helper()
	tmp := filepath.Join(e.keysDir, "."+p+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.keysDir, p)); err != nil {
		t.Fatal(err)
	}
}

// mint mints a token through the Go API.
func (e *env) mint(t testing.TB, g Grant) Minted {
	t.Helper()
	m, err := e.g.Mint(context.Background(), g)
	if err != nil {
		t.Fatalf("Mint(%+v) = %v", g, err)
	}
	return m
}

// do sends a request to the data plane and returns status, headers and
// body.
func (e *env) do(t testing.TB, method, path string, hdr map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.data.URL+path, rb)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = append(req.Header[k], v) // keep the name's letter case
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// adminPost posts body to the admin plane.
func (e *env) adminPost(t testing.TB, path, body string) (int, string) {
	t.Helper()
	resp, err := e.client.Post(e.admin.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mintHTTP mints through the admin API.
func (e *env) mintHTTP(t testing.TB, body string) MintResponse {
	t.Helper()
	code, b := e.adminPost(t, "/v1/gateway/tokens", body)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/gateway/tokens %s = %d %s, want 201", body, code, b)
	}
	var m MintResponse
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// revokeHTTP revokes through the admin API and returns the status.
func (e *env) revokeHTTP(t testing.TB, jti string) int {
	t.Helper()
	code, _ := e.adminPost(t, "/v1/gateway/tokens/"+jti+"/revoke", "")
	return code
}

// eventually polls f until it is true or 5 s pass.
func eventually(t testing.TB, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deadUpstream is the URL of an upstream that closes every connection
// unanswered. Its port stays taken until the test ends: a closed
// server's port could be taken by another test's server meanwhile and
// answer.
func deadUpstream(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}
