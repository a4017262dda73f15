package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/verify"
)

// startWitness runs `custody witness serve` for the log origin/vkey over
// TLS (a harness CA certificate) and returns its URL and vkey, and the
// custody serve flag that trusts its CA.
func startWitness(t *testing.T, ctx context.Context, dir, origin, logVKey string) (url, vkey, caFlag string) {
	t.Helper()
	ports, err := fixture.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "witness-ed25519.pem")
	out, code := custodyCLI(t, ctx, "witness", "key", "--key-file", keyFile, "--name", "w1.example")
	if code != 0 {
		t.Fatalf("custody witness key = %d %s", code, out)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	logf, err := os.Create(filepath.Join(dir, "witness.log"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := fixture.IssueServing(filepath.Join(dir, "tls"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(custodyBin, "witness", "serve", "--listen", addr, "--data-dir", dir, "--name", "w1.example",
		"--key-file", keyFile, "--log", origin+"="+logVKey, "--tls-cert-file", files.Cert, "--tls-key-file", files.Key)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	url = "https://" + addr
	if err := fixture.Poll(ctx, 15*time.Second, func() (bool, error) {
		resp, err := fixture.HTTPClient().Get(url + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	}); err != nil {
		t.Fatalf("witness did not start: %v", err)
	}
	return url, out, "--witness-ca-file=" + files.CA
}

// TestWitnessCosignsAndDetectsRollback: custody's signer sends checkpoints
// to a `custody witness serve`; trust.json then requires its cosignature
// and an exported run verifies with it. Restoring an older copy of the
// signer's database (a backup) is detected at start-up: the witness has
// cosigned a larger tree, so the signer records a rollback and refuses
// writes.
func TestWitnessCosignsAndDetectsRollback(t *testing.T) {
	ctx := testCtx(t)
	base := filepath.Join(workDir, "witnessed")
	// First start creates the signer's key; its trust.json names the log.
	srv, err := startCustody(ctx, "witnessed")
	if err != nil {
		t.Fatal(err)
	}
	trustFile := filepath.Join(base, "trust0.json")
	if out, code := custodyCLI(t, ctx, append([]string{"trust", "-o", trustFile}, adminArgs(srv)...)...); code != 0 {
		t.Fatalf("custody trust = %d %s", code, out)
	}
	srv.Stop()
	b, _ := os.ReadFile(trustFile)
	tr0, err := verify.ParseTrust(b)
	if err != nil {
		t.Fatal(err)
	}
	wdir := filepath.Join(workDir, "witness")
	if err := os.MkdirAll(wdir, 0o700); err != nil {
		t.Fatal(err)
	}
	wURL, wVKey, wCA := startWitness(t, ctx, wdir, tr0.Log.Origin, tr0.Log.Keys[0].NoteVerifier)

	// Back up the signer's database while its log is small.
	data := filepath.Join(base, "data")
	backup := filepath.Join(workDir, "witnessed-backup")
	if out, err := exec.Command("cp", "-a", data, backup).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v %s", err, out)
	}

	srv, err = startCustody(ctx, "witnessed", "--witness="+wVKey+"@"+wURL, wCA)
	if err != nil {
		t.Fatal(err)
	}
	pod := claimPod(t, ctx, "witnessed-agent")
	k := keyOf(t, exchange(t, ctx, srv.URL, podToken(t, ctx, pod)))
	runs := srv.URL + "/v1/signer/runs"
	r := do(t, ctx, "POST", runs, k.Key, nil)
	var reg struct{ Run string }
	if r.Status != http.StatusCreated || r.JSON(&reg) != nil {
		t.Fatalf("register = %s", r)
	}
	if r := do(t, ctx, "POST", runs+"/"+reg.Run+"/close", k.Key, nil); r.Status != http.StatusOK {
		t.Fatalf("close = %s", r)
	}
	trustFile = filepath.Join(base, "trust.json")
	bundle := filepath.Join(base, "run.bundle")
	if out, code := custodyCLI(t, ctx, append([]string{"trust", "-o", trustFile}, adminArgs(srv)...)...); code != 0 {
		t.Fatalf("custody trust = %d %s", code, out)
	}
	b, _ = os.ReadFile(trustFile)
	if tr, err := verify.ParseTrust(b); err != nil || tr.WitnessQuorum != 1 || len(tr.Witnesses) != 1 {
		t.Fatalf("trust.json with a witness = %+v, %v; want quorum 1", tr, err)
	}
	if out, code := custodyCLI(t, ctx, append([]string{"export", "--run", reg.Run, "-o", bundle}, adminArgs(srv)...)...); code != 0 {
		t.Fatalf("custody export = %d %s", code, out)
	}
	if out, code := custodyCLI(t, ctx, "verify", bundle, "--trust", trustFile); code != 0 || out != "VERIFIED" {
		t.Fatalf("custody verify (witnessed) = %d %q, want VERIFIED", code, out)
	}
	// Without the witness's cosignature the bundle fails trust.json's quorum.
	b, _ = os.ReadFile(bundle)
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "— w1.example ") {
			kept = append(kept, line)
		}
	}
	stripped := filepath.Join(base, "stripped.bundle")
	if err := os.WriteFile(stripped, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(kept) == len(strings.Split(string(b), "\n")) {
		t.Fatal("the bundle carries no cosignature by w1.example")
	}
	if out, code := custodyCLI(t, ctx, "verify", stripped, "--trust", trustFile); code != 1 {
		t.Errorf("custody verify without the cosignature = %d %q, want exit 1", code, out)
	}
	srv.Stop()

	// Restore the backup: the log is now smaller than what the witness
	// cosigned.
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup, data).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v %s", err, out)
	}
	srv, err = startCustody(ctx, "witnessed", "--witness="+wVKey+"@"+wURL, wCA)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	k = keyOf(t, exchange(t, ctx, srv.URL, podToken(t, ctx, pod)))
	var last fixture.Response
	err = fixture.Poll(ctx, 15*time.Second, func() (bool, error) {
		last = do(t, ctx, "POST", srv.URL+"/v1/signer/runs", k.Key, nil)
		return last.Status == http.StatusServiceUnavailable && errorCode(last) == "log_rollback", nil
	})
	if err != nil {
		t.Fatalf("register after restoring a backup = %s, want 503 log_rollback", last)
	}
}
