package signer_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/policy"
)

// TestAttack10PolicyReplacedKeepingModTime: a tenant policy rewritten with
// the same size and modification time (one rule's effect swapped for one
// of the same length, as cp -p, rsync -a, tar or a Nix store path with
// mtime 1 leave it; in place or by swapping a symlink to a new file) was
// not read again, so calls went on being decided by the old policy until
// a restart.
func TestAttack10PolicyReplacedKeepingModTime(t *testing.T) {
	allowLs := "rules:\n  - id: AGENTS-101\n    effect: allow\n    tool: Bash\n"
	denyLs := strings.Replace(allowLs, "allow", "deny ", 1)
	if len(allowLs) != len(denyLs) {
		t.Fatal("the two policies must have the same size")
	}
	mtime := time.Unix(1, 0)
	for _, swap := range []bool{false, true} {
		e := newEnv(t, nil)
		path := filepath.Join(e.opts.PolicyDir, "agents.yaml")
		dir := t.TempDir()
		put := func(name, content string) string {
			t.Helper()
			p := filepath.Join(dir, name)
			if !swap {
				p = path
				os.Remove(path)
			}
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			if swap {
				tmp := filepath.Join(dir, "tmp-link")
				if err := os.Symlink(p, tmp); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, path); err != nil {
					t.Fatal(err)
				}
			}
			return p
		}
		os.Remove(path)
		put("a1.yaml", allowLs)
		run := e.register(agentTok)
		if d, st := e.decide(agentTok, run, "c1", "Bash", `{"command":"ls"}`); st != 200 || d.Effect != policy.Allow {
			t.Fatalf("swap %v: first decide = %d %s, want allow", swap, st, d.Effect)
		}
		// Rewritten in place (same inode) the file also keeps its change
		// time unless the test waits: the wait is what a real edit takes.
		time.Sleep(10 * time.Millisecond)
		put("a2.yaml", denyLs)
		d, st := e.decide(agentTok, run, "c2", "Bash", `{"command":"ls"}`)
		if st != 200 || d.Effect != policy.Deny || !slices.Equal(d.RuleIDs, []string{"AGENTS-101"}) {
			t.Errorf("swap %v: decide after the policy was replaced = %d %s %v, want deny [AGENTS-101]", swap, st, d.Effect, d.RuleIDs)
		}
	}
}
