package signer_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/verify"
)

const denyBash = `rules:
  - id: AGENTS-101
    effect: deny
    tool: Bash
`

const brokenPolicy = "rules:\n  - id: AGENTS-201\n    effect: allow\n    tool: [Bash\n"

// TestPolicyReload edits a tenant's policy file under a running signer:
// each decision follows the file as it is at the call, records carry the
// hash of the file that decided, a file that does not parse denies every
// call under CUSTODY-POLICY-INVALID (the previous version is not kept),
// and the exported bundle holds every snapshot its records name.
func TestPolicyReload(t *testing.T) {
	e := newEnv(t, nil)
	path := filepath.Join(e.opts.PolicyDir, "agents.yaml")
	mtime := time.Now()
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		// A distinct modification time per version, whatever the file
		// system's timestamp granularity.
		mtime = mtime.Add(time.Minute)
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	run := e.register(agentTok)
	step := 0
	expect := func(tool, args string, effect policy.Effect, rules []string, content string) {
		t.Helper()
		step++
		d, st := e.decide(agentTok, run, "c"+string(rune('0'+step)), tool, args)
		if st != 200 {
			t.Fatalf("step %d: decide = %d", step, st)
		}
		if d.Effect != effect || !slices.Equal(d.RuleIDs, rules) {
			t.Fatalf("step %d: %s -> %s %v, want %s %v", step, tool, d.Effect, d.RuleIDs, effect, rules)
		}
		if want := verify.PolicyHash([]byte(content)); d.PolicyHash != want {
			t.Fatalf("step %d: policy_hash %s, want %s (hash of the file in force)", step, d.PolicyHash, want)
		}
	}

	expect("Bash", `{"command":"ls"}`, policy.Allow, []string{"AGENTS-001"}, allowBash)

	write(denyBash)
	expect("Bash", `{"command":"ls"}`, policy.Deny, []string{"AGENTS-101"}, denyBash)

	write(brokenPolicy)
	expect("Bash", `{"command":"ls"}`, policy.Deny, []string{policy.RulePolicyInvalid}, brokenPolicy)
	expect("WebFetch", `{"url":"http://169.254.169.254/latest/meta-data/"}`, policy.Deny,
		[]string{policy.RuleNetMetadata, policy.RuleNetInternal, policy.RulePolicyInvalid}, brokenPolicy)
	d, _ := e.decide(agentTok, run, "reason", "Bash", `{}`)
	if reason := d.Errors[policy.RulePolicyInvalid]; reason == "" || strings.Contains(reason, "AGENTS-201") || strings.Contains(reason, "[Bash") {
		t.Fatalf("invalid-policy reason %q: want a reason that quotes no policy content", reason)
	}

	write(allowBash)
	expect("Bash", `{"command":"ls"}`, policy.Allow, []string{"AGENTS-001"}, allowBash)

	// The tenant's file removed: built-in rules only, unmatched calls denied.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	d, _ = e.decide(agentTok, run, "gone", "Bash", `{"command":"ls"}`)
	if d.Effect != policy.Deny || d.PolicyHash != verify.PolicyHash(nil) {
		t.Fatalf("after removal: %s under %s, want deny under the empty policy", d.Effect, d.PolicyHash)
	}

	_, b := e.verify(run)
	have := map[string]string{}
	for _, p := range b.Header.Policies {
		have[p.Hash] = string(p.Snapshot)
	}
	for _, content := range []string{allowBash, denyBash, brokenPolicy, ""} {
		h := verify.PolicyHash([]byte(content))
		if got, ok := have[h]; !ok || got != content {
			t.Errorf("bundle snapshot %s: present %v, content %q; want %q", h, ok, got, content)
		}
	}
}
