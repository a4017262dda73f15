package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// benchToolCall is the answer of the benchmark upstream on /v1/tool: a
// chat completion asking for one tool call, with usage.
const benchToolCall = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-5-mini","choices":[{"index":0,"finish_reason":"tool_calls",` +
	`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls -la /workspace\"}"}}]}}],` +
	`"usage":{"prompt_tokens":50,"completion_tokens":9,"total_tokens":59}}`

// queueRecorder stands for serve's recorder (signer.InboxWriter.Add):
// it queues the call, nothing more; the consumer encodes it off the
// data path, as the InboxWriter's flush does, so that its cost is in the
// process CPU measured.
type queueRecorder struct{ q chan Call }

func (r queueRecorder) RecordCall(_ context.Context, c Call) {
	select {
	case r.q <- c:
	default:
	}
}

// BenchmarkRecordingOverhead: one gateway with a Recorder; requests with
// a run's token (recorded: bodies hashed, the response scanned for tool
// uses, the call encoded and queued) and with a token without a run (not
// recorded), interleaved in chunks, on an upstream answering a tool call.
// Reports p50 and process CPU per request of each, and their ratios.
// Target: recording adds under 10 % (rec-cpu-ratio, rec-p50-ratio < 1.1)
// and nothing is written per request.
func BenchmarkRecordingOverhead(b *testing.B) {
	rec := queueRecorder{q: make(chan Call, 1<<16)}
	go func() {
		for c := range rec.q {
			json.Marshal(c)
		}
	}()
	defer close(rec.q)
	e := newBenchEnv(b, func(o *Options) {
		o.Recorder = rec
		o.Providers["openai"] = ProviderConfig{BaseURL: o.Providers["openai"].BaseURL, AllowPaths: []string{"POST /v1/tool"}}
	})
	defer e.close()
	m, err := e.g.Mint(context.Background(), Grant{Providers: []string{"openai"}, RunID: "run-bench", Tenant: "t", Agent: "a"})
	if err != nil {
		b.Fatal(err)
	}
	plain, url := e.token, e.gw.URL+"/openai/v1/tool"
	var lat [2][]time.Duration
	var cpu [2]time.Duration
	const chunk = 50
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		for mode, tok := range []string{plain, m.Token} {
			e.token = tok
			c := cpuTime()
			for i := 0; i < n; i++ {
				t := time.Now()
				e.get(b, url)
				lat[mode] = append(lat[mode], time.Since(t))
			}
			cpu[mode] += cpuTime() - c
		}
	}
	b.StopTimer()
	e.token = plain
	p0, p1 := percentile(lat[0], .5), percentile(lat[1], .5)
	b.ReportMetric(us(p0), "plain-p50-µs")
	b.ReportMetric(us(p1), "rec-p50-µs")
	b.ReportMetric(float64(p1)/float64(p0), "rec-p50-ratio")
	b.ReportMetric(us(cpu[0])/float64(b.N), "plain-cpu-µs/req")
	b.ReportMetric(us(cpu[1])/float64(b.N), "rec-cpu-µs/req")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "rec-cpu-ratio")
}
