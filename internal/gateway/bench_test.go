package gateway

// Benchmarks compare the gateway with a floor: a minimal
// httputil.ReverseProxy built here with the same tuned transport, in
// front of the same httptest upstream, all on loopback. They report
// ratios and differences measured in one run, never absolute timings
// checked by a test. Run them with
//
//	go test -run '^$' -bench . -benchtime=2000x ./internal/gateway/

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sseEvents is the stream the benchmark upstream sends on /v1/sse.
const sseEvents = 20

// bigBody is what the benchmark upstream sends on /v1/big: 256 KiB of
// text with many near misses of the key "sk-bench".
var bigBody = strings.Repeat(`{"text":"the sk- prefix and sk-benc are not the key"},`, 256<<10/53)

type benchEnv struct {
	upstream, floor, gw *httptest.Server
	scrubFloor          *httptest.Server // the floor plus only the response scrubbing
	g                   *Gateway
	client              *http.Client
	clientTr            *http.Transport
	floorTr             *http.Transport
	token               string
}

func newBenchEnv(b *testing.B, mods ...func(*Options)) *benchEnv {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/big" {
			io.WriteString(w, bigBody)
			return
		}
		if r.URL.Path == "/v1/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < sseEvents; i++ {
				fmt.Fprintf(w, "event: delta\ndata: {\"i\":%d,\"text\":\"hello world\"}\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/tool" {
			io.WriteString(w, benchToolCall)
			return
		}
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"message":{"content":"hi"}}]}`)
	}))
	target, _ := url.Parse(up.URL)

	// The floor: the least a reverse proxy can do, on the same transport
	// configuration.
	floorTr := newTransport(nil, 10*time.Minute)
	floor := httptest.NewServer(fullDuplex(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     floorTr,
		FlushInterval: -1,
	}))
	scrubFloor := httptest.NewServer(fullDuplex(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     floorTr,
		FlushInterval: -1,
		ModifyResponse: func(res *http.Response) error {
			res.Body = &responseBody{src: res.Body, res: res, ctx: res.Request.Context(), secrets: [][]byte{[]byte("sk-bench")}}
			res.ContentLength = -1
			res.Header.Del("Content-Length")
			return nil
		},
	}))

	keys := b.TempDir()
	os.WriteFile(filepath.Join(keys, "openai"), []byte("sk-bench"), 0o600)
	opts := Options{
		Store:      newMemStore(),
		Providers:  map[string]ProviderConfig{"openai": {BaseURL: up.URL, AllowPaths: []string{"POST /v1/sse", "POST /v1/big"}}},
		KeysDir:    keys,
		SigningKey: newKey(b),
		Log:        slog.New(slog.DiscardHandler),
	}
	for _, f := range mods {
		f(&opts)
	}
	g, err := New(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	m, err := g.Mint(context.Background(), Grant{Providers: []string{"openai"}})
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(g.DataHandler())
	ctr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	e := &benchEnv{upstream: up, floor: floor, scrubFloor: scrubFloor, gw: gw, g: g, client: &http.Client{Transport: ctr}, clientTr: ctr, floorTr: floorTr, token: m.Token}
	// Warm both paths (connections, verification cache).
	for i := 0; i < 10; i++ {
		e.get(b, e.floor.URL+"/v1/chat/completions")
		e.get(b, e.gw.URL+"/openai/v1/chat/completions")
	}
	return e
}

// fullDuplex is what a bare ReverseProxy needs not to cut streams on
// keep-alive connections (see Gateway.serveData): without it the floor
// itself cut about one stream in a thousand.
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		defer r.Body.Close()
		h.ServeHTTP(w, r)
	})
}

func (e *benchEnv) close() {
	e.clientTr.CloseIdleConnections()
	e.gw.Close()
	e.floor.Close()
	e.scrubFloor.Close()
	e.g.Close()
	e.floorTr.CloseIdleConnections()
	e.upstream.Close()
}

func (e *benchEnv) request(url string) *http.Request {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"gpt","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// get sends one request and drains the response.
func (e *benchEnv) get(b *testing.B, url string) {
	resp, err := e.client.Do(e.request(url))
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("%s: status %d", url, resp.StatusCode)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkAddedLatency: p50 of sequential keep-alive requests through
// the floor and the gateway, interleaved. Target: added-p50 ≤ 50 µs.
func BenchmarkAddedLatency(b *testing.B) {
	e := newBenchEnv(b)
	defer e.close()
	floorURL, gwURL := e.floor.URL+"/v1/chat/completions", e.gw.URL+"/openai/v1/chat/completions"
	var fl, gl []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		e.get(b, floorURL)
		fl = append(fl, time.Since(t))
		t = time.Now()
		e.get(b, gwURL)
		gl = append(gl, time.Since(t))
	}
	b.StopTimer()
	f50, g50 := percentile(fl, .5), percentile(gl, .5)
	b.ReportMetric(us(f50), "floor-p50-µs")
	b.ReportMetric(us(g50), "gw-p50-µs")
	b.ReportMetric(us(g50-f50), "added-p50-µs")
	b.ReportMetric(us(percentile(gl, .99)-percentile(fl, .99)), "added-p99-µs")
	b.ReportMetric(float64(g50)/float64(f50), "p50-x-floor")
	b.ReportMetric(float64(percentile(gl, .99))/float64(percentile(fl, .99)), "p99-x-floor")
}

// mallocs is the process's heap allocation count so far.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCPUPerRequest: process CPU (user+sys, getrusage) per request
// directly to the upstream, through the floor and through the gateway, in
// alternating chunks. cpu-ratio counts the client and upstream too (same
// in every mode); proxy-cpu-ratio subtracts the direct baseline. Target:
// ≤ 1.3.
func BenchmarkCPUPerRequest(b *testing.B) {
	e := newBenchEnv(b)
	defer e.close()
	urls := []string{e.upstream.URL + "/v1/chat/completions", e.floor.URL + "/v1/chat/completions", e.gw.URL + "/openai/v1/chat/completions"}
	var cpu [3]time.Duration
	var allocs [3]uint64
	const chunk = 100
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		for m, u := range urls {
			c, a := cpuTime(), mallocs()
			for i := 0; i < n; i++ {
				e.get(b, u)
			}
			cpu[m] += cpuTime() - c
			allocs[m] += mallocs() - a
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return us(d) / float64(b.N) }
	b.ReportMetric(per(cpu[0]), "direct-cpu-µs/req")
	b.ReportMetric(per(cpu[1]), "floor-cpu-µs/req")
	b.ReportMetric(per(cpu[2]), "gw-cpu-µs/req")
	b.ReportMetric(float64(cpu[2])/float64(cpu[1]), "cpu-ratio")
	// Allocations per request of the whole process (client and upstream
	// included, the same in every mode).
	b.ReportMetric(float64(allocs[1])/float64(b.N), "floor-allocs/req")
	b.ReportMetric(float64(allocs[2])/float64(b.N), "gw-allocs/req")
	b.ReportMetric(float64(allocs[2]-min(allocs[0], allocs[2]))/float64(max(allocs[1]-min(allocs[0], allocs[1]), 1)), "proxy-allocs-ratio")
	if cpu[1] > cpu[0] {
		b.ReportMetric(float64(cpu[2]-cpu[0])/float64(cpu[1]-cpu[0]), "proxy-cpu-ratio")
	}
}

// BenchmarkScrubCost: time per 256 KiB response through the floor, the
// floor plus only the scrubbing response body, and the gateway,
// interleaved; medians reported. scrub-vs-floor is the scrubbing's own
// cost, gw-vs-floor the gateway's whole. Setup asserts the body arrives
// unchanged (it holds no key).
func BenchmarkScrubCost(b *testing.B) {
	e := newBenchEnv(b)
	defer e.close()
	urls := []string{e.floor.URL + "/v1/big", e.scrubFloor.URL + "/v1/big", e.gw.URL + "/openai/v1/big"}
	for _, u := range urls {
		resp, err := e.client.Do(e.request(u))
		if err != nil {
			b.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != bigBody {
			b.Fatalf("%s: body changed (%d bytes, want %d)", u, len(got), len(bigBody))
		}
	}
	var d [3][]time.Duration
	b.SetBytes(int64(len(bigBody)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for m, u := range urls {
			t := time.Now()
			e.get(b, u)
			d[m] = append(d[m], time.Since(t))
		}
	}
	b.StopTimer()
	f, s, g := percentile(d[0], .5), percentile(d[1], .5), percentile(d[2], .5)
	b.ReportMetric(us(f), "floor-p50-µs")
	b.ReportMetric(us(s), "scrub-p50-µs")
	b.ReportMetric(us(g), "gw-p50-µs")
	b.ReportMetric(float64(s)/float64(f), "scrub-vs-floor")
	b.ReportMetric(float64(g)/float64(f), "gw-vs-floor")
}

// sse sends one streaming request and returns the time to the first
// event and the whole body.
func (e *benchEnv) sse(b *testing.B, url string) (time.Duration, []byte) {
	t := time.Now()
	resp, err := e.client.Do(e.request(url))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var body bytes.Buffer
	var first time.Duration
	for {
		line, err := br.ReadBytes('\n')
		body.Write(line)
		if first == 0 && bytes.Equal(line, []byte("\n")) {
			first = time.Since(t)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatalf("%s: %v", url, err)
		}
	}
	return first, body.Bytes()
}

// BenchmarkSSEFirstEvent: time from sending the request to reading the
// first whole event, floor vs gateway. Setup asserts that the byte
// stream through the gateway is identical to the upstream's. Target:
// gateway ≤ floor + 0.1 ms.
func BenchmarkSSEFirstEvent(b *testing.B) {
	e := newBenchEnv(b)
	defer e.close()
	floorURL, gwURL := e.floor.URL+"/v1/sse", e.gw.URL+"/openai/v1/sse"
	_, direct := e.sse(b, e.upstream.URL+"/v1/sse")
	_, viaFloor := e.sse(b, floorURL)
	_, viaGW := e.sse(b, gwURL)
	if !bytes.Equal(direct, viaGW) || !bytes.Equal(direct, viaFloor) || bytes.Count(direct, []byte("\n\n")) != sseEvents {
		b.Fatalf("SSE streams differ:\ndirect  %q\ngateway %q", direct, viaGW)
	}
	var fl, gl []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, _ := e.sse(b, floorURL)
		fl = append(fl, d)
		d, _ = e.sse(b, gwURL)
		gl = append(gl, d)
	}
	b.StopTimer()
	f50, g50 := percentile(fl, .5), percentile(gl, .5)
	b.ReportMetric(us(f50), "floor-first-event-p50-µs")
	b.ReportMetric(us(g50), "gw-first-event-p50-µs")
	b.ReportMetric(us(g50-f50), "added-first-event-p50-µs")
}

// BenchmarkThroughput32: b.N requests from 32 concurrent keep-alive
// clients, three rounds per path, alternating. Target: gw-vs-floor ≥ 0.8.
func BenchmarkThroughput32(b *testing.B) {
	e := newBenchEnv(b)
	defer e.close()
	const clients = 32
	run := func(url string) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for c := 0; c < clients; c++ {
			n := b.N / clients
			if c < b.N%clients {
				n++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					resp, err := e.client.Do(e.request(url))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	floorURL, gwURL := e.floor.URL+"/v1/chat/completions", e.gw.URL+"/openai/v1/chat/completions"
	// Open the 32 client and upstream connections of both paths first.
	for _, u := range []string{floorURL, gwURL} {
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			wg.Go(func() { e.get(b, u) })
		}
		wg.Wait()
	}
	var ft, gt []time.Duration
	b.ResetTimer()
	// Three rounds per path, alternating which goes first; the median
	// round of each is reported, so that a burst of other load on the
	// machine during one round does not decide the ratio.
	for round := 0; round < 3; round++ {
		if round%2 == 0 {
			ft = append(ft, run(floorURL))
			gt = append(gt, run(gwURL))
		} else {
			gt = append(gt, run(gwURL))
			ft = append(ft, run(floorURL))
		}
	}
	b.StopTimer()
	rps := func(d []time.Duration) float64 { return float64(b.N) / percentile(d, .5).Seconds() }
	b.ReportMetric(rps(ft), "floor-req/s")
	b.ReportMetric(rps(gt), "gw-req/s")
	b.ReportMetric(rps(gt)/rps(ft), "gw-vs-floor")
}

// BenchmarkVerify: token verification plus the revocation check, with
// 10000 revocations in the in-memory set. "warm" finds the token in the
// verification cache; "cold" checks the signature every time. Target:
// < 50 µs for Ed25519.
func BenchmarkVerify(b *testing.B) {
	key := newKey(b)
	secret := []byte(strings.Repeat("s", 32))
	set := newRevocationSet()
	for i := 0; i < 10000; i++ {
		set.add(fmt.Sprintf("revoked-%d", i), time.Now().Add(time.Hour))
	}
	for _, tc := range []struct {
		name  string
		cache int
		hmac  bool
	}{
		{"ed25519-warm", 0, false},
		{"ed25519-cold", -1, false},
		{"hs256-cold", -1, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var iss *Issuer
			var v *Verifier
			cfg := TokenConfig{CacheSize: tc.cache}
			if tc.hmac {
				iss, _ = NewIssuer(cfg, nil, secret)
				v, _ = NewVerifier(cfg, nil, secret)
			} else {
				iss, _ = NewIssuer(cfg, key, nil)
				v, _ = NewVerifier(cfg, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, nil)
			}
			tok, _, err := iss.Mint(Grant{Providers: []string{"anthropic", "openai"}, RunID: "r1", Tenant: "agents", Agent: "run-1"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Verify(tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := v.Verify(tok)
				if err != nil || set.has(c.ID) {
					b.Fatal("verification failed")
				}
			}
		})
	}
}
