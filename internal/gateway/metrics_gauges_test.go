package gateway

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gauge is the value of the unlabelled gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestMetricsHeldBodiesAndViewAge: custody_gateway_held_body_bytes is
// the bytes of bodies held now (a request's while it is in flight, 0
// once it is done) and custody_gateway_revocation_view_age_seconds
// grows while the store does not answer polls, to the bound at which
// the gateway refuses.
func TestMetricsHeldBodiesAndViewAge(t *testing.T) {
	const poll, bound = 20 * time.Millisecond, 400 * time.Millisecond
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *Options) { o.Metrics = reg; o.PollInterval = poll; o.MaxStaleness = bound })
	const held, age = "custody_gateway_held_body_bytes", "custody_gateway_revocation_view_age_seconds"
	if v := gauge(t, reg, held); v != 0 {
		t.Errorf("%s at rest = %v, want 0", held, v)
	}
	if v := gauge(t, reg, age); v < 0 || v > 5 {
		t.Errorf("%s with the store answering = %v s, want about the poll interval", age, v)
	}

	arrived, release := make(chan struct{}), make(chan struct{})
	e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{}`)
	})
	tok := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}}).Token
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20) + `"}]}`
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", e.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := e.client.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-arrived
	if v := gauge(t, reg, held); v != float64(len(body)) {
		t.Errorf("%s with one request of %d bytes in flight = %v", held, len(body), v)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("request = %d", code)
	}
	eventually(t, held+" back to 0", func() bool { return gauge(t, reg, held) == 0 })

	e.store.setErrs(errors.New("connection refused"), nil)
	time.Sleep(bound)
	if v := gauge(t, reg, age); v < bound.Seconds() {
		t.Errorf("%s after %v without an answer = %v s", age, bound, v)
	}
	if code, _, _ := e.do(t, "POST", "/openai/v1/chat/completions", bearer(tok), `{"model":"gpt-4o-mini"}`); code != http.StatusServiceUnavailable {
		t.Errorf("a request with the view %v s old = %d, want 503", gauge(t, reg, age), code)
	}
	e.store.setErrs(nil, nil)
	eventually(t, age+" back under the poll bound", func() bool { return gauge(t, reg, age) < bound.Seconds() })
}
