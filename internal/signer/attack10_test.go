package signer_test

import (
	"encoding/json"
	"testing"
)

// TestAttack10DecideInexactInteger: {"id":1.152921504606847e18} is 2^60 =
// 1152921504606846976 to a tool reading it as a double (JavaScript, Python,
// Go floats), but its canonical form {"id":1152921504606847000}, which the
// policy engine decided on and the log committed to, is the integer
// 1152921504606847000 to the policy (json.Number.Int64) and to Python.
// Both spellings are now refused (400) before anything is decided.
func TestAttack10DecideInexactInteger(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	for i, args := range []string{`{"id":1.152921504606847e18}`, `{"id":1152921504606847000}`, `{"n":100000000000000000000000}`} {
		var eb map[string]any
		if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/decide",
			map[string]any{"call_id": "c" + string(rune('1'+i)), "tool": "Bash", "args": json.RawMessage(args)}, &eb); st != 400 {
			t.Errorf("decide(%s) = %d %v, want 400", args, st, eb)
		}
	}
	// Integers a double holds exactly stay accepted, however written.
	for i, args := range []string{`{"id":1.8014398509481984e16}`, `{"n":1000000000000000000000}`, `{"n":1e23}`} {
		if d, st := e.decide(agentTok, run, "d"+string(rune('1'+i)), "Bash", args); st != 200 {
			t.Errorf("decide(%s) = %d %+v, want 200", args, st, d)
		}
	}
}
