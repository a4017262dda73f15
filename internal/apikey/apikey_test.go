package apikey

import (
	"context"
	"crypto/sha256"
	"errors"
	"github.com/agentcustody/custody/internal/ratelimit"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is an in-memory Store that counts lookups.
type memStore struct {
	mu      sync.Mutex
	recs    map[[32]byte]Record
	lookups int
}

func newMemStore() *memStore { return &memStore{recs: map[[32]byte]Record{}} }

func (m *memStore) count() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.recs) }

func (m *memStore) InsertKey(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[r.Hash] = r
	return nil
}

func (m *memStore) LookupKey(_ context.Context, h [32]byte) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	r, ok := m.recs[h]
	if !ok {
		return Record{}, ErrNotFound
	}
	return r, nil
}

func (m *memStore) RevokeKey(_ context.Context, h [32]byte, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[h]
	if !ok {
		return ErrNotFound
	}
	if r.RevokedAt.IsZero() {
		r.RevokedAt = at
	}
	m.recs[h] = r
	return nil
}

func (m *memStore) RevokeAgentKeys(_ context.Context, tenant, agent string, at time.Time) ([][32]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][32]byte
	for h, r := range m.recs {
		if r.Identity.Tenant == tenant && r.Identity.Agent == agent && r.RevokedAt.IsZero() && r.ExpiresAt.After(at) {
			r.RevokedAt = at
			m.recs[h] = r
			out = append(out, h)
		}
	}
	return out, nil
}

func (m *memStore) DeleteExpiredKeys(_ context.Context, before time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for h, r := range m.recs {
		if r.ExpiresAt.Before(before) {
			delete(m.recs, h)
			n++
		}
	}
	return n, nil
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }

var alice = Identity{Tenant: "agents", Agent: "run-1", Session: "pod-a", Method: "kubernetes"}

func newService(t testing.TB, opts Options) (*Service, *memStore, *clock) {
	t.Helper()
	st, clk := newMemStore(), newClock()
	opts.Store, opts.Now = st, clk.Now
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, st, clk
}

func TestMintVerify(t *testing.T) {
	s, st, _ := newService(t, Options{})
	m, err := s.Mint(context.Background(), alice, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Key) != keyLen || !strings.HasPrefix(m.Key, Prefix) {
		t.Fatalf("Mint().Key has length %d, want %d with prefix %s", len(m.Key), keyLen, Prefix)
	}
	h := sha256.Sum256([]byte(m.Key))
	if st.recs[h].Identity != alice {
		t.Fatalf("store holds %+v under the key's SHA-256, want %+v", st.recs[h].Identity, alice)
	}
	for _, r := range st.recs {
		if strings.Contains(r.ID(), m.Key) {
			t.Fatal("store keeps the key itself")
		}
	}
	r, err := s.Verify(context.Background(), m.Key)
	if err != nil || r.Identity != alice {
		t.Fatalf("Verify() = %+v, %v; want alice", r.Identity, err)
	}
	if got := m.ExpiresAt.Sub(r.IssuedAt); got != 15*time.Minute {
		t.Errorf("TTL = %v, want 15m", got)
	}
}

func TestVerifyRefusals(t *testing.T) {
	s, _, clk := newService(t, Options{})
	ctx := context.Background()
	m, _ := s.Mint(ctx, alice, time.Minute)
	other, _ := s.Mint(ctx, alice, time.Hour)
	tests := []struct {
		name string
		key  string
		prep func()
		want error
	}{
		{"empty", "", nil, ErrMalformed},
		{"wrong prefix", "xx_" + m.Key[3:], nil, ErrMalformed},
		{"bad character", m.Key[:10] + "!" + m.Key[11:], nil, ErrMalformed},
		{"too long", m.Key + "A", nil, ErrMalformed},
		{"unknown", Prefix + strings.Repeat("A", 43), nil, ErrUnknown},
		{"expired", m.Key, func() { clk.Add(time.Minute) }, ErrExpired},
		{"revoked", other.Key, func() {
			if _, err := s.Verify(ctx, other.Key); err != nil { // warm the cache
				t.Fatal(err)
			}
			if err := s.Revoke(ctx, other.Key); err != nil {
				t.Fatal(err)
			}
		}, ErrRevoked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prep != nil {
				tc.prep()
			}
			_, err := s.Verify(ctx, tc.key)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("Verify() = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCache(t *testing.T) {
	s, st, clk := newService(t, Options{CacheTTL: 30 * time.Second})
	ctx := context.Background()
	m, _ := s.Mint(ctx, alice, 40*time.Second)
	for i := 0; i < 5; i++ {
		if _, err := s.Verify(ctx, m.Key); err != nil {
			t.Fatal(err)
		}
	}
	if st.lookups != 1 {
		t.Errorf("5 verifications made %d store lookups, want 1", st.lookups)
	}
	clk.Add(31 * time.Second)
	s.Verify(ctx, m.Key)
	if st.lookups != 2 {
		t.Errorf("after the cache TTL: %d lookups, want 2", st.lookups)
	}
	// The entry cached at 31 s must not outlive the key (40 s).
	clk.Add(10 * time.Second)
	if _, err := s.Verify(ctx, m.Key); !errors.Is(err, ErrExpired) {
		t.Errorf("Verify() past the key's expiry = %v, want ErrExpired", err)
	}
}

func TestCacheDisabled(t *testing.T) {
	s, st, _ := newService(t, Options{CacheTTL: -1})
	m, _ := s.Mint(context.Background(), alice, 0)
	s.Verify(context.Background(), m.Key)
	s.Verify(context.Background(), m.Key)
	if st.lookups != 2 {
		t.Errorf("lookups = %d with the cache disabled, want 2", st.lookups)
	}
}

func TestRevokeAgent(t *testing.T) {
	s, _, _ := newService(t, Options{})
	ctx := context.Background()
	a1, _ := s.Mint(ctx, alice, 0)
	a2, _ := s.Mint(ctx, alice, 0)
	bob := alice
	bob.Agent = "run-2"
	b, _ := s.Mint(ctx, bob, 0)
	s.Verify(ctx, a1.Key)
	n, err := s.RevokeAgent(ctx, "agents", "run-1")
	if err != nil || n != 2 {
		t.Fatalf("RevokeAgent() = %d, %v; want 2", n, err)
	}
	for _, k := range []string{a1.Key, a2.Key} {
		if _, err := s.Verify(ctx, k); !errors.Is(err, ErrRevoked) {
			t.Errorf("Verify(revoked agent key) = %v, want ErrRevoked", err)
		}
	}
	if _, err := s.Verify(ctx, b.Key); err != nil {
		t.Errorf("Verify(other agent) = %v, want success", err)
	}
}

// TestEvict: a revocation made by another replica (straight in the store)
// is hidden by this replica's cache until Evict drops that key or
// EvictAll drops every key.
func TestEvict(t *testing.T) {
	s, st, _ := newService(t, Options{})
	ctx := context.Background()
	a, _ := s.Mint(ctx, alice, 0)
	b, _ := s.Mint(ctx, alice, 0)
	for _, m := range []Minted{a, b} {
		if _, err := s.Verify(ctx, m.Key); err != nil {
			t.Fatal(err)
		}
		st.RevokeKey(ctx, sha256.Sum256([]byte(m.Key)), time.Now())
		if _, err := s.Verify(ctx, m.Key); err != nil {
			t.Fatalf("Verify(cached, revoked elsewhere) = %v, want the cached success", err)
		}
	}
	s.Evict(sha256.Sum256([]byte(a.Key)))
	if _, err := s.Verify(ctx, a.Key); !errors.Is(err, ErrRevoked) {
		t.Errorf("Verify(a) after Evict(a) = %v, want ErrRevoked", err)
	}
	if _, err := s.Verify(ctx, b.Key); err != nil {
		t.Errorf("Verify(b) after Evict(a) = %v, want the cached success", err)
	}
	s.EvictAll()
	if _, err := s.Verify(ctx, b.Key); !errors.Is(err, ErrRevoked) {
		t.Errorf("Verify(b) after EvictAll() = %v, want ErrRevoked", err)
	}

	off, _, _ := newService(t, Options{CacheTTL: -1})
	off.Evict([32]byte{}) // no cache: nothing to do, no panic
	off.EvictAll()
}

// racyStore runs afterLookup once a lookup has read the store.
type racyStore struct {
	*memStore
	afterLookup func()
}

func (r *racyStore) LookupKey(ctx context.Context, h [32]byte) (Record, error) {
	rec, err := r.memStore.LookupKey(ctx, h)
	if f := r.afterLookup; f != nil {
		r.afterLookup = nil
		f()
	}
	return rec, err
}

// TestEvictDuringLookup: a verification that read the key before it was
// revoked and evicted must not cache it afterwards.
func TestEvictDuringLookup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		evict func(s *Service, h [32]byte)
	}{
		{"Evict", func(s *Service, h [32]byte) { s.Evict(h) }},
		{"EvictAll", func(s *Service, h [32]byte) { s.EvictAll() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &racyStore{memStore: newMemStore()}
			s, err := New(Options{Store: st, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			m, _ := s.Mint(ctx, alice, 0)
			h := sha256.Sum256([]byte(m.Key))
			st.afterLookup = func() { // another replica revokes; its notice arrives
				st.RevokeKey(ctx, h, time.Now())
				tc.evict(s, h)
			}
			if _, err := s.Verify(ctx, m.Key); err != nil {
				t.Fatalf("Verify() racing the revocation = %v, want the success it read", err)
			}
			if _, err := s.Verify(ctx, m.Key); !errors.Is(err, ErrRevoked) {
				t.Errorf("Verify() after the eviction = %v, want ErrRevoked (the racing read must not be cached)", err)
			}
		})
	}
}

func TestMiddleware(t *testing.T) {
	s, _, _ := newService(t, Options{})
	m, _ := s.Mint(context.Background(), alice, 0)
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, _ := FromContext(r.Context())
		w.Write([]byte(rec.Identity.Agent))
	}))
	for _, tc := range []struct {
		name, header string
		status       int
	}{
		{"valid", "Bearer " + m.Key, 200},
		{"scheme case", "bearer " + m.Key, 200},
		{"missing", "", 401},
		{"basic", "Basic " + m.Key, 401},
		{"garbage", "Bearer nope", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d", rec.Code, tc.status)
			}
			if tc.status == 401 && !strings.Contains(rec.Body.String(), `"unauthenticated"`) {
				t.Errorf("body = %s, want the uniform unauthenticated error", rec.Body)
			}
			if strings.Contains(rec.Body.String(), m.Key) {
				t.Error("response contains the key")
			}
		})
	}
}

type authFunc func(context.Context, string) (Identity, error)

func (f authFunc) Authenticate(ctx context.Context, c string) (Identity, error) { return f(ctx, c) }

func TestExchangeHandler(t *testing.T) {
	s, _, _ := newService(t, Options{})
	errNo := errors.New("no")
	a := authFunc(func(_ context.Context, tok string) (Identity, error) {
		if tok == "good" {
			return alice, nil
		}
		return Identity{}, errNo
	})
	refuse := func(err error) Refusal {
		return Refusal{Status: 401, Code: "unauthenticated", Message: "token refused"}
	}
	h := s.ExchangeHandler(a, refuse, s.log, ExchangeLimits{})
	for _, tc := range []struct {
		name, method, body string
		status             int
		want               string
	}{
		{"ok", "POST", `{"token":"good"}`, 200, `"agent":"run-1"`},
		{"refused", "POST", `{"token":"bad"}`, 401, `"unauthenticated"`},
		{"not json", "POST", `token=good`, 400, `"bad_request"`},
		{"no token", "POST", `{}`, 400, `"bad_request"`},
		{"too large", "POST", `{"token":"` + strings.Repeat("a", 70000) + `"}`, 413, `"too_large"`},
		{"GET", "GET", ``, 405, `"method_not_allowed"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/v1/auth/kubernetes", strings.NewReader(tc.body)))
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%s = %d %s, want %d containing %s", tc.name, rec.Code, rec.Body, tc.status, tc.want)
			}
		})
	}
}

// TestExchangeRateLimits: a pod over its exchange limit gets 429
// rate_limited with Retry-After and no key (and no key is minted); another
// pod is not affected; a flood from one address is cut before the token is
// even checked.
func TestExchangeRateLimits(t *testing.T) {
	s, st, _ := newService(t, Options{})
	checked := 0
	a := authFunc(func(_ context.Context, tok string) (Identity, error) {
		checked++
		id := alice
		id.Session = tok
		return id, nil
	})
	refuse := func(err error) Refusal { return Refusal{Status: 401, Code: "unauthenticated"} }
	h := s.ExchangeHandler(a, refuse, s.log, ExchangeLimits{
		ByIdentity: ratelimit.New(1.0/60, 2, 0, nil),  // 2, then one a minute
		ByAddress:  ratelimit.New(1.0/60, 10, 0, nil), // 10, then one a minute
	})
	exchange := func(tok, addr string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/auth/kubernetes", strings.NewReader(`{"token":"`+tok+`"}`))
		req.RemoteAddr = addr
		h.ServeHTTP(rec, req)
		return rec
	}
	before := st.count()
	for i := range 2 {
		if rec := exchange("pod-1", "10.0.0.1:1234"); rec.Code != 200 {
			t.Fatalf("exchange %d = %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := exchange("pod-1", "10.0.0.1:1234")
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), `"rate_limited"`) || rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), Prefix) {
		t.Fatalf("third exchange of pod-1 = %d %s (Retry-After %q), want 429 rate_limited without a key", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	if got := st.count() - before; got != 2 {
		t.Fatalf("%d keys minted, want 2", got)
	}
	if rec := exchange("pod-2", "10.0.0.2:1234"); rec.Code != 200 {
		t.Fatalf("another pod = %d, want 200", rec.Code)
	}
	n := checked
	for range 10 {
		exchange("flood", "10.0.0.9:5555")
	}
	if rec := exchange("flood", "10.0.0.9:5556"); rec.Code != 429 || !strings.Contains(rec.Body.String(), "address") {
		t.Fatalf("11th exchange from one address = %d %s, want 429", rec.Code, rec.Body)
	}
	if checked-n != 10 {
		t.Fatalf("%d tokens checked for the flood, want 10 (the 11th is refused before the check)", checked-n)
	}
}

// BenchmarkVerifyCached measures key verification with a warm cache
// (target: under 5 µs, 0 allocations). BenchmarkSHA256Key is its floor:
// hashing the key, which every verification must do.
func BenchmarkVerifyCached(b *testing.B) {
	s, _, _ := newService(b, Options{})
	m, _ := s.Mint(context.Background(), alice, time.Hour)
	ctx := context.Background()
	if _, err := s.Verify(ctx, m.Key); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Verify(ctx, m.Key); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSHA256Key(b *testing.B) {
	key := Prefix + strings.Repeat("A", 43)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = sha256.Sum256([]byte(key))
	}
}

// TestRefusalDuringLookup: a verification that read the key before it was
// revoked elsewhere, with no eviction since (the notification was lost),
// must not cache it once another verification on this replica has seen
// the revocation: a replica that has refused a key never accepts it
// again. With the cache full of live keys, the tombstone takes one's
// place; full of tombstones, the refusal evicts instead.
func TestRefusalDuringLookup(t *testing.T) {
	for _, fill := range []string{"", "live", "tombstone"} {
		t.Run("full="+fill, func(t *testing.T) {
			st := &racyStore{memStore: newMemStore()}
			size := 0 // the default
			if fill != "" {
				size = 1
			}
			s, err := New(Options{Store: st, CacheSize: size, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			other, _ := s.Mint(ctx, alice, 0)
			if fill == "tombstone" {
				st.RevokeKey(ctx, sha256.Sum256([]byte(other.Key)), time.Now())
			}
			if _, err := s.Verify(ctx, other.Key); (err != nil) != (fill == "tombstone") {
				t.Fatalf("Verify(other) = %v", err)
			}
			m, _ := s.Mint(ctx, alice, 0)
			h := sha256.Sum256([]byte(m.Key))
			st.afterLookup = func() { // revoked elsewhere; a second request here sees it
				st.RevokeKey(ctx, h, time.Now())
				if _, err := s.Verify(ctx, m.Key); !errors.Is(err, ErrRevoked) {
					t.Errorf("Verify() after the revocation = %v, want ErrRevoked", err)
				}
			}
			if _, err := s.Verify(ctx, m.Key); err != nil {
				t.Fatalf("Verify() racing the revocation = %v, want the success it read", err)
			}
			lookups := st.lookups
			for range 3 {
				if _, err := s.Verify(ctx, m.Key); !errors.Is(err, ErrRevoked) {
					t.Fatalf("Verify() after a refusal = %v, want ErrRevoked (the racing read must not be cached)", err)
				}
			}
			if fill != "tombstone" && st.lookups != lookups {
				t.Errorf("refusals after the first read the store %d times, want 0 (the tombstone answers)", st.lookups-lookups)
			}
			if fill == "live" { // the live key it displaced is read again
				if _, err := s.Verify(ctx, other.Key); err != nil {
					t.Errorf("Verify(other) after its entry made room for a tombstone = %v", err)
				}
			}
		})
	}
}
