package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

// custodyCLI runs the custody binary and returns its combined output and
// exit code.
func custodyCLI(t *testing.T, ctx context.Context, args ...string) (string, int) {
	t.Helper()
	out, err := exec.CommandContext(ctx, custodyBin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(out)), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), 0
}

func adminArgs(c *fixture.Custody) []string {
	return c.AdminArgs()
}

// exportRun writes the trust.json of srv's signer and the bundle of run
// into srv's directory with `custody trust` and `custody export`, and
// returns their paths.
func exportRun(t *testing.T, ctx context.Context, srv *fixture.Custody, run string) (trust, bundle string) {
	t.Helper()
	dir := filepath.Dir(srv.Log)
	trust, bundle = filepath.Join(dir, "trust.json"), filepath.Join(dir, "run.bundle")
	if out, code := custodyCLI(t, ctx, append([]string{"trust", "-o", trust}, adminArgs(srv)...)...); code != 0 {
		t.Fatalf("custody trust = %d %s", code, out)
	}
	if out, code := custodyCLI(t, ctx, append([]string{"export", "--run", run, "-o", bundle}, adminArgs(srv)...)...); code != 0 {
		t.Fatalf("custody export = %d %s", code, out)
	}
	return trust, bundle
}

// TestSignerRecordSurvivesSandbox is the signer scenario against the real
// control plane: a claim's pod (attested by the exchange) registers a run,
// Bash is allowed, a WebFetch to the metadata address is denied by the
// built-in rules, the Sandbox is deleted, and the exported run verifies
// offline as open; a tampered bundle is refused.
func TestSignerRecordSurvivesSandbox(t *testing.T) {
	ctx := testCtx(t)
	srv := custody
	pod := claimPod(t, ctx, "audited")
	k := keyOf(t, exchange(t, ctx, srv.URL, podToken(t, ctx, pod)))
	runs := srv.URL + "/v1/signer/runs"
	r := do(t, ctx, "POST", runs, k.Key, nil)
	var reg struct{ Run, Agent, Session string }
	if r.Status != http.StatusCreated || r.JSON(&reg) != nil || reg.Agent != "audited" || reg.Session != pod.Name {
		t.Fatalf("register = %s, want 201 for audited/%s", r, pod.Name)
	}
	decide := func(id, tool string, args map[string]any) (string, []string) {
		r := do(t, ctx, "POST", runs+"/"+reg.Run+"/decide", k.Key, map[string]any{"call_id": id, "tool": tool, "args": args})
		var d struct {
			Effect  string   `json:"effect"`
			RuleIDs []string `json:"rule_ids"`
		}
		if r.Status != http.StatusOK || r.JSON(&d) != nil {
			t.Fatalf("decide %s = %s", tool, r)
		}
		return d.Effect, d.RuleIDs
	}
	if eff, ids := decide("c1", "Bash", map[string]any{"command": "ls"}); eff != "allow" || !slices.Contains(ids, "AGENTS-001") {
		t.Errorf("Bash = %s %v, want allow by AGENTS-001", eff, ids)
	}
	if eff, ids := decide("c2", "WebFetch", map[string]any{"url": "http://2852039166/latest/meta-data/"}); eff != "deny" ||
		!slices.Contains(ids, "CUSTODY-NET-METADATA") || !slices.Contains(ids, "CUSTODY-NET-INTERNAL") {
		t.Errorf("WebFetch to the metadata address (decimal) = %s %v, want deny by the built-in rules", eff, ids)
	}
	// Another agent cannot touch the run.
	other := keyOf(t, exchange(t, ctx, srv.URL, podToken(t, ctx, claimPod(t, ctx, "intruder"))))
	if r := do(t, ctx, "POST", runs+"/"+reg.Run+"/decide", other.Key, map[string]any{"call_id": "x", "tool": "Bash", "args": map[string]any{}}); r.Status != http.StatusForbidden {
		t.Errorf("another agent decides in the run = %s, want 403", r)
	}

	ref := metav1.GetControllerOf(pod)
	if err := env.CP.Dynamic.Resource(sandboxGVR).Namespace(fixture.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitPodGone(ctx, pod); err != nil {
		t.Fatal(err)
	}
	trust, bundle := exportRun(t, ctx, srv, reg.Run)
	if out, code := custodyCLI(t, ctx, "verify", bundle, "--trust", trust); code != 0 || out != "VERIFIED TO HEAD 2 (open)" {
		t.Fatalf("custody verify (open run) = %d %q, want VERIFIED TO HEAD 2 (open)", code, out)
	}
	if out, code := custodyCLI(t, ctx, "verify", bundle, "--trust", trust, "--run", "some-other-run"); code != 1 || !strings.HasPrefix(out, "FAILED") {
		t.Errorf("custody verify --run other = %d %q, want exit 1 FAILED", code, out)
	}
	if out, code := custodyCLI(t, ctx, "verify", bundle, "--trust", trust, "--run", reg.Run); code != 0 {
		t.Errorf("custody verify --run %s = %d %q, want 0", reg.Run, code, out)
	}
	// A tampered bundle is refused with exit code 1.
	b, _ := os.ReadFile(bundle)
	tampered := strings.Replace(string(b), `"effect":"deny"`, `"effect":"allow"`, 1)
	if tampered == string(b) {
		t.Fatal("the bundle does not contain the deny decision")
	}
	bad := filepath.Join(filepath.Dir(bundle), "tampered.bundle")
	if err := os.WriteFile(bad, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := custodyCLI(t, ctx, "verify", bad, "--trust", trust); code != 1 || !strings.HasPrefix(out, "FAILED") {
		t.Errorf("custody verify (tampered) = %d %q, want exit 1 FAILED", code, out)
	}

}

// TestSignerIdleClose: a run with no calls for idle_s is closed by the
// signer with a signed run.closing; its bundle then verifies as closed and
// further calls are refused.
func TestSignerIdleClose(t *testing.T) {
	ctx := testCtx(t)
	srv, err := startCustody(ctx, "signer-idle", "--signer-idle=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	pod := claimPod(t, ctx, "idler")
	k := keyOf(t, exchange(t, ctx, srv.URL, podToken(t, ctx, pod)))
	runs := srv.URL + "/v1/signer/runs"
	r := do(t, ctx, "POST", runs, k.Key, nil)
	var reg struct{ Run string }
	if r.Status != http.StatusCreated || r.JSON(&reg) != nil {
		t.Fatalf("register = %s", r)
	}
	time.Sleep(4 * time.Second)
	trust, bundle := exportRun(t, ctx, srv, reg.Run)
	if out, code := custodyCLI(t, ctx, "verify", bundle, "--trust", trust); code != 0 || out != "VERIFIED" {
		t.Fatalf("custody verify (idle-closed run) = %d %q, want VERIFIED", code, out)
	}
	if r := do(t, ctx, "POST", runs+"/"+reg.Run+"/decide", k.Key, map[string]any{"call_id": "c3", "tool": "Bash", "args": map[string]any{}}); r.Status != http.StatusConflict {
		t.Errorf("decide after close = %s, want 409 run_closed", r)
	}
}
