package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/policy"
)

// TestAttackUnquoteDollarBraceQuadratic: the free-text scan unquotes
// every argument string (unquote), and for each "${" it looks for the
// closing "}" from there to the end of the string. A string of "${"
// repeated with no "}" makes that quadratic: a 1 MiB decide body (the
// signer's bound; the MCP proxy's and egress proxy's calls go through
// the same engine) costs seconds of CPU per request, measured ~2 s at
// 600 KB through the signer's HTTP API. Any sandbox with a key can pin a
// core per request. Scanning 4x the bytes must not cost 16x the time.
func TestAttackUnquoteDollarBraceQuadratic(t *testing.T) {
	p, err := policy.Parse("a.yaml", []byte("rules:\n  - id: A-1\n    effect: allow\n    tool: Bash\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cost := func(n int) time.Duration {
		args, _ := json.Marshal(map[string]string{"command": strings.Repeat("${", n)})
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			e.Decide(context.Background(), p, policy.Call{Tool: "Bash", Args: args})
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := cost(50_000), cost(200_000)
	t.Logf("100 KB: %v; 400 KB: %v (x%.1f)", small, large, float64(large)/float64(small))
	if large > 10*small {
		t.Errorf("4x the \"${\" costs %.1fx the time (%v -> %v): quadratic in the argument's length", float64(large)/float64(small), small, large)
	}
}
