package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

// demoIdle is the signer's idle_s in the demo (an hour by default). S4
// must export the run while it is still open: on the real node that
// comes after the kubelet has really stopped the deleted Sandbox's pod
// (sandboxd's 2 s shutdown included), which took more than 4 s in a
// newcomer's run, so 4 s (the stand-in's old value) raced.
const demoIdle = 15 * time.Second

type signerScenario struct {
	*scenario
	env        *fixture.Env
	custody    *fixture.Custody
	custodyBin string
	dir        string
}

func (s *signerScenario) cli(ctx context.Context, args ...string) (string, int) {
	return custodyCLI(ctx, s.custodyBin, args...)
}

// custodyCLI runs the custody binary and returns its trimmed combined
// output and exit code (-1 if it could not run).
func custodyCLI(ctx context.Context, bin string, args ...string) (string, int) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return err.Error(), -1
	}
	return strings.TrimSpace(string(out)), code
}

func (s *signerScenario) run(ctx context.Context) {
	if err := s.env.CreateClaim(ctx, "audit"); err != nil {
		s.failErr("S1", "create claim audit", err)
		return
	}
	pod, err := s.env.ClaimPod(ctx, "audit")
	if err != nil {
		s.failErr("S1", "claim audit", err)
		return
	}
	_, k, err := s.exchange(ctx, pod)
	if err != nil || k.Key == "" {
		s.failErr("S1", "exchange for claim audit", err)
		return
	}
	base := s.url + "/v1/signer/runs"
	r, err := fixture.Do(ctx, "POST", base, k.Key, nil)
	runID := jsonField(r, "run")
	s.check("S1", "pod "+pod.Name+" of claim audit registers a run", r, err, r.Status == http.StatusCreated && runID != "", "want 201 with a run id")
	if runID == "" {
		return
	}
	r, err = fixture.Do(ctx, "POST", base+"/"+runID+"/decide", k.Key,
		map[string]any{"call_id": "c1", "tool": "Bash", "args": map[string]any{"command": "ls /workspace"}})
	s.check("S2", "c1 Bash", r, err, r.Status == http.StatusOK && jsonField(r, "effect") == "allow", "want allow")
	r, err = fixture.Do(ctx, "POST", base+"/"+runID+"/decide", k.Key,
		map[string]any{"call_id": "c2", "tool": "WebFetch", "args": map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}})
	ids := jsonStrings(r, "rule_ids")
	s.check("S3", "c2 WebFetch http://169.254.169.254/: deny "+strings.Join(ids, " "), r, err,
		r.Status == http.StatusOK && jsonField(r, "effect") == "deny" && contains(ids, "CUSTODY-NET-METADATA") && contains(ids, "CUSTODY-NET-INTERNAL"),
		"want deny by the built-in metadata and internal-address rules")
	r, err = fixture.Do(ctx, "POST", base+"/"+runID+"/decide", k.Key,
		map[string]any{"call_id": "c3", "tool": "Bash", "args": map[string]any{"command": "curl -s 0xA9FEA9FE/latest/meta-data/iam/"}})
	ids = jsonStrings(r, "rule_ids")
	s.check("S3b", "c3 Bash curl -s 0xA9FEA9FE/... (the metadata address in hex, in a shell command): deny "+strings.Join(ids, " "), r, err,
		r.Status == http.StatusOK && jsonField(r, "effect") == "deny" && contains(ids, "CUSTODY-NET-METADATA"),
		"want deny by the built-in metadata rule")

	// The Sandbox is deleted (its pod goes with it); the record stays.
	ref := metav1.GetControllerOf(pod)
	sbGVR := schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	if err := s.env.CP.Dynamic.Resource(sbGVR).Namespace(fixture.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		s.failErr("S4", "delete Sandbox "+ref.Name, err)
		return
	}
	if err := s.env.WaitPodGone(ctx, pod); err != nil {
		s.failErr("S4", "pod gone", err)
		return
	}
	admin := s.custody.AdminArgs()
	trust := filepath.Join(s.dir, "trust.json")
	if out, code := s.cli(ctx, append([]string{"trust", "-o", trust}, admin...)...); code != 0 {
		s.failErr("S4", "custody trust", fmt.Errorf("exit %d: %s", code, out))
		return
	}
	bundle := filepath.Join(s.dir, "run.bundle")
	if out, code := s.cli(ctx, append([]string{"export", "--run", runID, "-o", bundle}, admin...)...); code != 0 {
		s.failErr("S4", "custody export", fmt.Errorf("exit %d: %s", code, out))
		return
	}
	out, code := s.cli(ctx, "verify", bundle, "--trust", trust)
	s.line("S4", "Sandbox "+ref.Name+" deleted; run exported and verified offline with trust.json", code == 0 && strings.HasPrefix(out, "VERIFIED TO HEAD ") && strings.HasSuffix(out, "(open)"),
		"custody verify: "+out, "want VERIFIED TO HEAD n (open)")

	// The signer closes the idle run itself: export and verify every
	// second until the bundle verifies closed, for at most demoIdle + 10 s.
	deadline := time.Now().Add(demoIdle + 10*time.Second)
	for {
		if out, code := s.cli(ctx, append([]string{"export", "--run", runID, "-o", bundle}, admin...)...); code != 0 {
			s.failErr("S5", "custody export", fmt.Errorf("exit %d: %s", code, out))
			return
		}
		out, code = s.cli(ctx, "verify", bundle, "--trust", trust)
		if out == "VERIFIED" || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	s.line("S5", fmt.Sprintf("after %v idle the signer closed the run (run.closing idle_timeout); verified again", demoIdle), code == 0 && out == "VERIFIED",
		"custody verify: "+out, "want VERIFIED")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
