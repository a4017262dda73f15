package tlsfile_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/tlsfile"
)

// BenchmarkHandshake: what TLS from a Reloader adds to a small request,
// against plain HTTP to the same handler in the same run, in alternating
// chunks: on a new connection each time (the handshake: ECDSA P-256,
// TLS 1.3) and on a kept-alive one (record encryption only). Reports p50
// latency and process CPU (client and server, getrusage) per request,
// and their ratios to plain HTTP.
func BenchmarkHandshake(b *testing.B) {
	e := newEnv(b, false)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) })
	// Two http.Servers alike but for TLS (not httptest: its StartTLS
	// would serve its own certificate, and its wrapper costs CPU).
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		return ln
	}
	pln, sln := listen(), listen()
	plain := &http.Server{Handler: h}
	secure := &http.Server{Handler: h, TLSConfig: e.r.ServerConfig(tls.NoClientCert)}
	go plain.Serve(pln)
	go secure.ServeTLS(sln, "", "")
	defer plain.Close()
	defer secure.Close()
	plainURL, secureURL := "http://"+pln.Addr().String(), "https://"+sln.Addr().String()
	cc, err := tlsfile.ClientConfig(e.files.CA)
	if err != nil {
		b.Fatal(err)
	}
	clients := map[string]*http.Client{}
	for _, keep := range []bool{false, true} {
		name := "new"
		if keep {
			name = "kept"
		}
		clients["plain-"+name] = &http.Client{Transport: &http.Transport{DisableKeepAlives: !keep}}
		clients["tls-"+name] = &http.Client{Transport: &http.Transport{DisableKeepAlives: !keep, TLSClientConfig: cc.Clone()}}
	}
	url := map[string]string{"plain-new": plainURL, "plain-kept": plainURL, "tls-new": secureURL, "tls-kept": secureURL}
	modes := []string{"plain-new", "tls-new", "plain-kept", "tls-kept"}
	lat := map[string][]time.Duration{}
	cpu := map[string]time.Duration{}
	const chunk = 20
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; done, round = done+chunk, round+1 {
		n := min(chunk, b.N-done)
		// The order rotates each round, so that no mode always follows
		// another (and pays for its garbage).
		for i := range modes {
			m := modes[(i+round)%len(modes)]
			c0 := cpuTime()
			for range n {
				t := time.Now()
				resp, err := clients[m].Get(url[m])
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[m] = append(lat[m], time.Since(t))
			}
			cpu[m] += cpuTime() - c0
		}
	}
	b.StopTimer()
	for _, k := range []string{"new", "kept"} {
		p, s := "plain-"+k, "tls-"+k
		b.ReportMetric(us(p50(lat[s])), s+"-p50-µs")
		b.ReportMetric(float64(p50(lat[s]))/float64(p50(lat[p])), s+"-p50-ratio")
		b.ReportMetric(us(cpu[s])/float64(b.N), s+"-cpu-µs/req")
		b.ReportMetric(float64(cpu[s])/float64(cpu[p]), s+"-cpu-ratio")
	}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
