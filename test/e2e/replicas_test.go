package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentcustody/custody/client"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

// TestReplicasOnPostgreSQL runs two custody replicas on one PostgreSQL
// database with shared key files, as deploy/postgres does: a key minted
// by one works on the other, a memory remembered on one is recalled on
// the other, a key revoked on one is refused by the other at once (not
// after its 30 s cache: LISTEN/NOTIFY), exactly one replica writes the
// signer's log while the other stands by with 503 signer_standby, and
// when the writer stops the standby takes over the same run, whose
// bundle then verifies.
func TestReplicasOnPostgreSQL(t *testing.T) {
	ctx := testCtx(t)
	dbURL := pgtest.Schema(t)
	// The shared keys are made once, as an operator does before creating
	// the Secret; replicas never generate them.
	keys := t.TempDir()
	if out, code := custodyCLI(t, ctx, "keys", "init", "--dir", keys); code != 0 {
		t.Fatalf("custody keys init = %d %s", code, out)
	}
	start := func(name string) *fixture.Custody {
		t.Helper()
		c, err := startCustody(ctx, name, "--database-url="+dbURL, "--key-cache-ttl=30s",
			"--signer-key-file="+filepath.Join(keys, "signer-ed25519.pem"), "--gateway-signing-key="+filepath.Join(keys, "gateway-ed25519.pem"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		return c
	}
	a := start("pg-replica-a")
	b := start("pg-replica-b")

	pod := claimPod(t, ctx, "replicated")
	k := keyOf(t, exchange(t, ctx, a.URL, podToken(t, ctx, pod)))
	mem := memoriesURL(b.URL, fixture.Namespace, "replicated")
	if r := do(t, ctx, "POST", memoriesURL(a.URL, fixture.Namespace, "replicated"), k.Key,
		map[string]any{"kind": "fact", "text": "the build uses postgres replicas"}); r.Status != http.StatusCreated {
		t.Fatalf("remember on a = %s", r)
	}
	r := get(t, ctx, mem+"?q=replicas", k.Key)
	var got struct {
		Memories []struct{ Text string } `json:"memories"`
	}
	if r.Status != http.StatusOK || r.JSON(&got) != nil || len(got.Memories) != 1 {
		t.Fatalf("recall on b = %s, want the memory remembered on a", r)
	}

	// Revoked on a, refused by b well inside b's 30 s cache.
	revoked := time.Now()
	if r := do(t, ctx, "POST", a.URL+"/v1/auth/revoke", k.Key, nil); r.Status/100 != 2 {
		t.Fatalf("revoke on a = %s", r)
	}
	if err := fixture.Poll(ctx, 10*time.Second, func() (bool, error) {
		return get(t, ctx, mem, k.Key).Status == http.StatusUnauthorized, nil
	}); err != nil {
		t.Fatalf("b still accepts the key revoked on a after 10 s (cache TTL 30 s): %v", err)
	}
	t.Logf("revocation on a reached b in %v", time.Since(revoked).Round(time.Millisecond))

	// One writer, one standby.
	k = keyOf(t, exchange(t, ctx, b.URL, podToken(t, ctx, pod)))
	var writer, standby *fixture.Custody
	var run string
	if err := fixture.Poll(ctx, 20*time.Second, func() (bool, error) {
		for _, c := range []*fixture.Custody{a, b} {
			r := do(t, ctx, "POST", c.URL+"/v1/signer/runs", k.Key, nil)
			var reg struct{ Run string }
			if r.Status == http.StatusCreated && r.JSON(&reg) == nil {
				writer, run = c, reg.Run
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("no replica became the signer's writer")
	}
	standby = a
	if writer == a {
		standby = b
	}
	r = do(t, ctx, "POST", standby.URL+"/v1/signer/runs", k.Key, nil)
	if r.Status != http.StatusServiceUnavailable || errorCode(r) != "signer_standby" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("register on the standby = %s, want 503 signer_standby with Retry-After", r)
	}
	decide := func(c *fixture.Custody, id string) fixture.Response {
		return do(t, ctx, "POST", c.URL+"/v1/signer/runs/"+run+"/decide", k.Key,
			map[string]any{"call_id": id, "tool": "Bash", "args": map[string]any{"command": "ls"}})
	}
	if r := decide(writer, "c1"); r.Status != http.StatusOK {
		t.Fatalf("decide on the writer = %s", r)
	}

	// The writer stops; the standby takes the lease over and continues the
	// run. The agent's client rides through the hand-over: it retries the
	// standby's 503 signer_standby after each Retry-After.
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(podToken(t, ctx, pod)), 0o600); err != nil {
		t.Fatal(err)
	}
	agent, err := client.New(client.Config{URL: standby.URL, TokenFile: tokFile, CAFile: standby.CAFile, StandbyWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	writer.Stop()
	stopped := time.Now()
	d, err := agent.Decide(ctx, run, "c2", "Bash", json.RawMessage(`{"command":"ls"}`))
	if err != nil || d.Effect != "allow" || d.RunSeq != 2 {
		t.Fatalf("decide through the standby after the writer stopped = %+v, %v; want allow at run_seq 2", d, err)
	}
	t.Logf("the standby took over %v after the writer stopped", time.Since(stopped).Round(time.Millisecond))
	trust, bundle := exportRun(t, ctx, standby, run)
	// run.registered, c1 on the first writer, c2 on the second: head 2.
	if out, code := custodyCLI(t, ctx, "verify", bundle, "--trust", trust); code != 0 || out != "VERIFIED TO HEAD 2 (open)" {
		t.Fatalf("custody verify = %d %q, want VERIFIED TO HEAD 2 (open)", code, out)
	}
}
