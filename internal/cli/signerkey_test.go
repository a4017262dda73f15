package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// TestReplicaWithAnotherLogKeyIsNotReady: a replica given a log key that
// did not sign the shared log never runs the signer; it says so — /readyz
// fails its "signer" check and signer calls get 503 signer_unavailable —
// instead of claiming another replica holds the lease. The writer
// reports custody_signer_writer 1.
func TestReplicaWithAnotherLogKeyIsNotReady(t *testing.T) {
	dir := t.TempDir()
	token := "local-dev-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	must(t, os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte("tokens:\n  - sha256: "+hex.EncodeToString(sum[:])+
		"\n    tenant: local\n    agent: dev\n    session: laptop\n"), 0o600))
	db := pgtest.Schema(t)
	type rep struct{ api, metrics string }
	start := func(name, keys string) (rep, func()) {
		if code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "keys", "init", "--dir", keys); code != 0 {
			t.Fatalf("keys init = %d %s %s", code, out, errs)
		}
		r := rep{freeAddr(t), freeAddr(t)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			runCLI(t, ctx, envMap(map[string]string{"CUSTODY_DATABASE_URL": db}), "", "serve", "--kubernetes-auth=false",
				"--static-tokens-file="+filepath.Join(dir, "tokens.yaml"), "--listen="+r.api, "--metrics-listen="+r.metrics,
				"--gateway-listen=", "--signer-key-file="+filepath.Join(keys, signerKeyFile),
				"--data-dir="+filepath.Join(dir, name), "--log-level=error")
		}()
		waitHTTP(t, "http://"+r.api+"/healthz")
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return r, stop
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func(url, bearer, body string) (int, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	a, stopA := start("a", filepath.Join(dir, "keys-a"))
	_, body := post("http://"+a.api+"/v1/auth/static", "", `{"token":"`+token+`"}`)
	var k struct{ Key string }
	must(t, json.Unmarshal([]byte(body), &k))
	poll("a to run the signer", func() bool { st, _ := post("http://"+a.api+"/v1/signer/runs", k.Key, ""); return st == 201 })
	if _, m := get("http://" + a.metrics + "/metrics"); !strings.Contains(m, "custody_signer_writer 1") {
		t.Errorf("the writer's metrics lack custody_signer_writer 1")
	}
	stopA()

	b, _ := start("b", filepath.Join(dir, "keys-b")) // another log key
	poll("b's /readyz to fail on the signer", func() bool {
		st, body := get("http://" + b.metrics + "/readyz")
		return st == http.StatusServiceUnavailable && strings.Contains(body, "signer")
	})
	_, body = post("http://"+b.api+"/v1/auth/static", "", `{"token":"`+token+`"}`)
	must(t, json.Unmarshal([]byte(body), &k))
	if st, body := post("http://"+b.api+"/v1/signer/runs", k.Key, ""); st != 503 || !strings.Contains(body, "signer_unavailable") {
		t.Fatalf("signer call on the misconfigured replica = %d %s, want 503 signer_unavailable", st, body)
	}
	if _, m := get("http://" + b.metrics + "/metrics"); !strings.Contains(m, "custody_signer_writer 0") {
		t.Errorf("the misconfigured replica's metrics lack custody_signer_writer 0")
	}
}
