package apikey

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/ratelimit"
)

type attackClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *attackClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *attackClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestAttackRetryAfterTooEarly: Retry-After is the wait rounded to the
// nearest second, not up. A client that waits exactly Retry-After (as
// RFC 9110 invites) is refused again: with --exchange-pod-rate 30 (one key
// every 2 s), a refusal 0.6 s after the burst is spent says
// "Retry-After: 1", but the next token is due 1.4 s later.
func TestAttackRetryAfterTooEarly(t *testing.T) {
	s, _, _ := newService(t, Options{})
	c := &attackClock{t: time.Unix(1_000_000, 0)}
	a := authFunc(func(context.Context, string) (Identity, error) { return alice, nil })
	refuse := func(error) Refusal { return Refusal{Status: 401, Code: "unauthenticated"} }
	h := s.ExchangeHandler(a, refuse, s.log, ExchangeLimits{
		ByIdentity: ratelimit.New(30.0/60, 20, 0, c.now), // serve.go: cfg.ExchangePodRate/60, burst 20
	})
	exchange := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/auth/kubernetes", strings.NewReader(`{"token":"t"}`)))
		return rec
	}
	for i := range 20 {
		if rec := exchange(); rec.Code != 200 {
			t.Fatalf("burst exchange %d = %d %s", i, rec.Code, rec.Body)
		}
	}
	c.add(600 * time.Millisecond)
	rec := exchange()
	if rec.Code != 429 {
		t.Fatalf("over the limit = %d, want 429", rec.Code)
	}
	ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	if err != nil {
		t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
	}
	c.add(time.Duration(ra) * time.Second)
	if rec := exchange(); rec.Code != 200 {
		t.Fatalf("after waiting Retry-After: %d s the exchange is refused again (%d %s, Retry-After %s): the header is rounded down", ra, rec.Code, strings.TrimSpace(rec.Body.String()), rec.Header().Get("Retry-After"))
	}
}

// TestAttackConcurrentBurst: 200 concurrent exchanges of one pod
// incarnation (in the same instant) mint exactly the burst, and every
// refusal is a 429 without a key.
func TestAttackConcurrentBurst(t *testing.T) {
	s, st, _ := newService(t, Options{})
	c := &attackClock{t: time.Unix(1_000_000, 0)}
	a := authFunc(func(context.Context, string) (Identity, error) { id := alice; id.PodUID = "uid-1"; return id, nil })
	refuse := func(error) Refusal { return Refusal{Status: 401, Code: "unauthenticated"} }
	h := s.ExchangeHandler(a, refuse, s.log, ExchangeLimits{ByIdentity: ratelimit.New(1, 20, 0, c.now)})
	before := st.count()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/auth/kubernetes", strings.NewReader(`{"token":"t"}`)))
			if rec.Code != 200 && strings.Contains(rec.Body.String(), Prefix) {
				t.Errorf("refusal %d carries a key", rec.Code)
			}
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[200] != 20 || codes[429] != 180 || st.count()-before != 20 {
		t.Fatalf("codes %v, %d keys minted; want 20 x 200, 180 x 429, 20 keys", codes, st.count()-before)
	}
}

// TestAddressLimitKeysIPv6ByPrefix: one client with an IPv6 /64 (any
// host on a routed /64 can use every address in it) is one address for
// the per-address limit — otherwise each request from a fresh address
// gets a full burst, and 100,000 of them fill the limiter so that every
// new pod's first exchange is refused. IPv4 (also IPv4-mapped) stays
// per address.
func TestAddressLimitKeysIPv6ByPrefix(t *testing.T) {
	s, _, _ := newService(t, Options{})
	c := &attackClock{t: time.Unix(1_000_000, 0)}
	a := authFunc(func(context.Context, string) (Identity, error) { return alice, nil })
	refuse := func(error) Refusal { return Refusal{Status: 401, Code: "unauthenticated"} }
	h := s.ExchangeHandler(a, refuse, s.log, ExchangeLimits{ByAddress: ratelimit.New(1, 5, 0, c.now)})
	exchange := func(remote string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/auth/kubernetes", strings.NewReader(`{"token":"t"}`))
		req.RemoteAddr = remote
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	ok := 0
	for i := range 20 {
		if exchange("[2001:db8:1:2::"+strconv.FormatInt(int64(i+1), 16)+"]:40000") == 200 {
			ok++
		}
	}
	if ok != 5 {
		t.Errorf("20 exchanges from 20 addresses of one /64: %d allowed, want the burst of 5", ok)
	}
	if code := exchange("[2001:db8:1:3::1]:40000"); code != 200 {
		t.Errorf("another /64 = %d, want 200", code)
	}
	for i, remote := range []string{"10.0.0.1:1", "10.0.0.2:1", "[::ffff:10.0.0.3]:1"} {
		if code := exchange(remote); code != 200 {
			t.Errorf("IPv4 address %d (%s) = %d, want 200 (its own bucket)", i, remote, code)
		}
	}
}
