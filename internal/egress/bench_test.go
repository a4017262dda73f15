package egress

// The egress proxy's own cost, against the same requests made directly,
// interleaved in one run and reported as p50s, their difference and
// ratio. Decide here is an in-memory allow: a signer decision adds its
// group commit on top (see internal/signer's benchmarks). Run with
//
//	go test -run '^$' -bench . -benchtime=2000x ./internal/egress/

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"
)

func benchProxy(b *testing.B) *url.URL {
	p := &Proxy{
		Dialer:       loopbackAllowed,
		Authenticate: func(*http.Request) (Caller, error) { return Caller{Run: "r1"}, nil },
		Decide: func(context.Context, Caller, Request) (Decision, error) {
			return Decision{Allow: true, RuleIDs: []string{"BENCH"}, CallID: "c"}, nil
		},
		Complete: func(context.Context, Caller, Decision, Outcome) error { return nil },
	}
	srv := httptest.NewServer(p)
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("r1", "key")
	return u
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func get(b *testing.B, c *http.Client, u string) {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// BenchmarkEgressPlainHTTP: a plain-HTTP GET directly and through the
// proxy (client to proxy kept alive; the proxy dials the upstream per
// request, as it decides per request).
func BenchmarkEgressPlainHTTP(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	pu := benchProxy(b)
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	via := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	dl, vl := interleave(b, direct, via, up.URL)
	report(b, "proxy", dl, vl)
}

// BenchmarkEgressConnect: a new TLS connection and one GET, directly and
// through a CONNECT tunnel of the proxy.
func BenchmarkEgressConnect(b *testing.B) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	pu := benchProxy(b)
	tlsc := &tls.Config{InsecureSkipVerify: true} // the benchmark's own TLS server
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsc, DisableKeepAlives: true}}
	via := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsc, DisableKeepAlives: true, Proxy: http.ProxyURL(pu)}}
	dl, vl := interleave(b, direct, via, up.URL)
	report(b, "tunnel", dl, vl)
}

// interleave GETs u directly and through via, alternating, b.N times
// each, and returns the latencies of each.
func interleave(b *testing.B, direct, via *http.Client, u string) (dl, vl []time.Duration) {
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		get(b, direct, u)
		dl = append(dl, time.Since(t))
		t = time.Now()
		get(b, via, u)
		vl = append(vl, time.Since(t))
	}
	b.StopTimer()
	return dl, vl
}

// report reports the p50s of direct and proxied requests (the latter
// named name), their difference and ratio.
func report(b *testing.B, name string, dl, vl []time.Duration) {
	b.ReportMetric(float64(p50(dl).Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(p50(vl).Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64((p50(vl) - p50(dl)).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64(p50(vl))/float64(p50(dl)), name+"-ratio")
}
