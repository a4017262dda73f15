package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

func procCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func p50(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// benchUpstream answers a chat completion with usage (JSON), or, on a
// stream request, its first event at once and the rest after 2 ms.
func benchUpstream(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-fake\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}],\"usage\":null}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
			fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"gpt-fake","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":9,"total_tokens":59}}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchGateways are two gateways on one SQLite store and one upstream:
// one without a meter (the floor) and one with.
type benchGateways struct {
	plain, metered *httptest.Server
	tokPlain       string // a token without budgets (used on both)
	tokBudget      string // a token with a budget: reserve and settle per request
	client         *http.Client
}

func newBenchGateways(b *testing.B) *benchGateways {
	st := openSQLite(b, b.TempDir())
	up := benchUpstream(b)
	key := newKey(b)
	keys := b.TempDir()
	if err := os.WriteFile(filepath.Join(keys, "openai"), []byte(fakeRealKey), 0o600); err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	mk := func(m *metering.Meter) *gateway.Gateway {
		g, err := gateway.New(context.Background(), gateway.Options{
			Store: st, Providers: map[string]gateway.ProviderConfig{"openai": {BaseURL: up.URL}},
			KeysDir: keys, SigningKey: key, Meter: m, Log: quiet,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { g.Close() })
		return g
	}
	m, err := metering.New(metering.Options{Store: st, Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(context.Background()) })
	gp, gm := mk(nil), mk(m)
	bg := &benchGateways{plain: httptest.NewServer(gp.DataHandler()), metered: httptest.NewServer(gm.DataHandler())}
	b.Cleanup(bg.plain.Close)
	b.Cleanup(bg.metered.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	bg.client = &http.Client{Transport: tr}
	mint := func(g gateway.Grant) string {
		mt, err := gp.Mint(context.Background(), g)
		if err != nil {
			b.Fatal(err)
		}
		return mt.Token
	}
	bg.tokPlain = mint(gateway.Grant{Providers: []string{"openai"}, Tenant: "t", TTL: 24 * time.Hour})
	bg.tokBudget = mint(gateway.Grant{Providers: []string{"openai"}, Tenant: "t", TTL: 24 * time.Hour,
		Budget: metering.Usage{Requests: 1 << 40, InputTokens: 1 << 50, OutputTokens: 1 << 50}})
	return bg
}

const benchBody = `{"model":"gpt-fake","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`

// do sends one request and returns when the response has ended (or, for
// firstEvent, when its first event's line has arrived).
func (bg *benchGateways) do(b *testing.B, url, tok, body string, firstEvent bool) time.Duration {
	req, _ := http.NewRequest(http.MethodPost, url+"/openai/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	t := time.Now()
	res, err := bg.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(res.Body)
		b.Fatalf("%s: %d %s", url, res.StatusCode, msg)
	}
	var d time.Duration
	if firstEvent {
		br := bufio.NewReader(res.Body)
		if _, err := br.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		d = time.Since(t)
		io.Copy(io.Discard, br)
		return d
	}
	io.Copy(io.Discard, res.Body)
	return time.Since(t)
}

// BenchmarkMeteringOverhead: the same chat completion through a gateway
// without a meter (plain) and through one with a meter and a token
// without budgets (meter: the response scanned for usage, counted in
// memory, written every 200 ms), in alternating chunks of 50, in one
// run. Reports p50 and process CPU per request (client and upstream
// included, the same in both modes) and their ratios. Target:
// meter-cpu-ratio under 1.1.
func BenchmarkMeteringOverhead(b *testing.B) {
	bg := newBenchGateways(b)
	benchModes(b, bg, []string{"plain", "meter"}, []benchMode{{bg.plain.URL, bg.tokPlain}, {bg.metered.URL, bg.tokPlain}})
}

// BenchmarkBudgetOverhead: as BenchmarkMeteringOverhead, with a token
// holding a budget (budget: a reservation before forwarding and a
// settlement after, each a durable SQLite transaction) against plain.
func BenchmarkBudgetOverhead(b *testing.B) {
	bg := newBenchGateways(b)
	benchModes(b, bg, []string{"plain", "budget"}, []benchMode{{bg.plain.URL, bg.tokPlain}, {bg.metered.URL, bg.tokBudget}})
}

type benchMode struct{ url, tok string }

func benchModes(b *testing.B, bg *benchGateways, names []string, modes []benchMode) {
	for _, m := range modes { // warm connections and caches
		bg.do(b, m.url, m.tok, benchBody, false)
	}
	lat := make([][]time.Duration, len(modes))
	cpu := make([]time.Duration, len(modes))
	const chunk = 50
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; done, round = done+chunk, round+1 {
		n := min(chunk, b.N-done)
		for k := range modes {
			i := (k + round) % len(modes)
			c := procCPU()
			for range n {
				lat[i] = append(lat[i], bg.do(b, modes[i].url, modes[i].tok, benchBody, false))
			}
			cpu[i] += procCPU() - c
		}
	}
	b.StopTimer()
	for i, name := range names {
		b.ReportMetric(us(p50(lat[i])), name+"-p50-µs")
		b.ReportMetric(us(cpu[i])/float64(b.N), name+"-cpu-µs/req")
		if i > 0 {
			b.ReportMetric(float64(p50(lat[i]))/float64(p50(lat[0])), name+"-p50-ratio")
			b.ReportMetric(float64(cpu[i])/float64(cpu[0]), name+"-cpu-ratio")
		}
	}
}

// BenchmarkMeteringFirstEvent: time to the first event of a stream
// through the plain gateway, the metered one (which reads the body and
// adds include_usage) and with a budget (which also reserves before
// forwarding), rotating. Target: meter-first-event-ratio about 1.
func BenchmarkMeteringFirstEvent(b *testing.B) {
	bg := newBenchGateways(b)
	body := strings.Replace(benchBody, `{`, `{"stream":true,`, 1)
	modes := []struct{ url, tok string }{{bg.plain.URL, bg.tokPlain}, {bg.metered.URL, bg.tokPlain}, {bg.metered.URL, bg.tokBudget}}
	lat := make([][]time.Duration, len(modes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range modes {
			j := (k + i) % len(modes)
			lat[j] = append(lat[j], bg.do(b, modes[j].url, modes[j].tok, body, true))
		}
	}
	b.StopTimer()
	for i, name := range []string{"plain", "meter", "budget"} {
		b.ReportMetric(us(p50(lat[i])), name+"-first-event-p50-µs")
		if i > 0 {
			b.ReportMetric(float64(p50(lat[i]))/float64(p50(lat[0])), name+"-first-event-ratio")
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
