package mcpproxy_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkMCPProxyCall times one allowed tools/call through the proxy
// (decide and complete on the real signer on SQLite, synchronous=FULL:
// two durable records per call, plus the upstream round trip) against
// the same call sent directly to the upstream, alternating, and reports
// both and their ratio.
func BenchmarkMCPProxyCall(b *testing.B) {
	e := newEnv(b, nil)
	client := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
	direct, err := client.Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: e.up.URL,
		HTTPClient: &http.Client{Transport: bearer{e.up.secret}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	proxied, _ := e.mustConnect(e.key, "")
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "benchmark"}}
	do := func(cs *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		r, err := cs.CallTool(e.ctx, params)
		if err != nil || r.IsError {
			b.Fatalf("CallTool = %+v, %v", r, err)
		}
		return time.Since(t0)
	}
	do(direct)
	do(proxied)
	b.ResetTimer()
	var dd, dp time.Duration
	for range b.N {
		dd += do(direct)
		dp += do(proxied)
	}
	b.StopTimer()
	b.ReportMetric(float64(dd.Nanoseconds())/float64(b.N), "direct-ns/call")
	b.ReportMetric(float64(dp.Nanoseconds())/float64(b.N), "proxy-ns/call")
	b.ReportMetric(float64(dp)/float64(dd), "proxy/direct")
}
