package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/tooluse"
)

// A hostile response cannot make the inbox entry invalid: names that are
// not printable ASCII are replaced and their uses marked malformed,
// provider-run tools are left out, and arguments over the entry's budget
// are dropped (truncated), so the entry stays under the signer's bound.
func TestModelCallOfBoundsHostileResponse(t *testing.T) {
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", 256<<10-10) + `"}`)
	res := tooluse.Result{Uses: []tooluse.Use{
		{Name: "Bash\n; rm", Args: json.RawMessage(`{}`)},
		{Name: "web_search", Server: true},
		{Name: "", Args: json.RawMessage(`{}`)},
	}, HasUsage: true, Model: strings.Repeat("m", 300), StopReason: "tool_use"}
	for range 60 {
		res.Uses = append(res.Uses, tooluse.Use{Name: "Write", Args: big})
	}
	mc := modelCallOf(gateway.Call{RunID: "r", Tenant: "t", Agent: "a", Provider: "anthropic", Response: res})
	if len(mc.ToolUses) != 62 {
		t.Fatalf("%d uses, want 62 (the server tool left out)", len(mc.ToolUses))
	}
	for _, u := range mc.ToolUses[:2] {
		if !strings.HasPrefix(u.Name, "invalid:") || !u.Malformed || u.Args != nil {
			t.Errorf("use %+v: want an invalid: name, malformed, no args", u)
		}
	}
	if mc.Model != "" || mc.StopReason != "tool_use" {
		t.Errorf("model %q, stop %q", mc.Model, mc.StopReason)
	}
	total, truncated := 0, 0
	for _, u := range mc.ToolUses {
		total += len(u.Args)
		if u.Truncated {
			truncated++
		}
	}
	if total > maxEntryArgs || truncated == 0 {
		t.Errorf("args %d bytes (bound %d), %d truncated", total, maxEntryArgs, truncated)
	}
	b, _ := json.Marshal(mc)
	if len(b) > 8<<20 {
		t.Errorf("entry is %d bytes, over the signer's 8 MiB", len(b))
	}
}

// The Responses API response id reaches the inbox entry (the signer
// counts a use a retrieve carries again once by it), bounded like the
// other values read from the response: one the signer would refuse is
// left out, not the entry.
func TestAttack10ModelCallOfResponseID(t *testing.T) {
	for in, want := range map[string]string{"resp_1": "resp_1", "resp\n1": "", strings.Repeat("r", 257): "", "": ""} {
		mc := modelCallOf(gateway.Call{RunID: "r", Tenant: "t", Agent: "a", Provider: "openai", Response: tooluse.Result{ResponseID: in}})
		if mc.ResponseID != want {
			t.Errorf("modelCallOf(ResponseID %q).ResponseID = %q, want %q", in, mc.ResponseID, want)
		}
	}
}
