package cli

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReplicaWithAnotherLogKeyRefusesTheSigner: a replica given a log key
// that did not sign the shared log never runs the signer; it says so —
// signer calls get 503 signer_unavailable, custody_signer_start_failures_total
// counts — instead of claiming another replica holds the lease, and it
// stays ready for what it can serve. The writer reports
// custody_signer_writer 1.
func TestReplicaWithAnotherLogKeyRefusesTheSigner(t *testing.T) {
	p := newPGReplicas(t)
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func(url, bearer, body string) (int, string) {
		st, b, _ := p.do("POST", url, bearer, body)
		return st, b
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	a, stopA := p.start("a", filepath.Join(p.dir, "keys-a"))
	ka := p.key(a)
	poll("a to run the signer", func() bool { st, _ := post("http://"+a.api+"/v1/signer/runs", ka, ""); return st == 201 })
	if _, m := get("http://" + a.metrics + "/metrics"); !strings.Contains(m, "custody_signer_writer 1") {
		t.Errorf("the writer's metrics lack custody_signer_writer 1")
	}
	stopA()

	b, _ := p.start("b", filepath.Join(p.dir, "keys-b")) // another log key
	kb := p.key(b)
	poll("b to refuse signer calls as unavailable", func() bool {
		st, body := post("http://"+b.api+"/v1/signer/runs", kb, "")
		return st == 503 && strings.Contains(body, "signer_unavailable")
	})
	if st, body := get("http://" + b.metrics + "/readyz"); st != 200 {
		t.Errorf("b's /readyz = %d %s: a signer-only misconfiguration must not take keys and memory away", st, body)
	}
	if _, m := get("http://" + b.metrics + "/metrics"); strings.Contains(m, "custody_signer_start_failures_total 0") || !strings.Contains(m, "custody_signer_start_failures_total") {
		t.Errorf("b's metrics do not count the failed starts")
	}
	if _, m := get("http://" + b.metrics + "/metrics"); !strings.Contains(m, "custody_signer_writer 0") {
		t.Errorf("the misconfigured replica's metrics lack custody_signer_writer 0")
	}
}
