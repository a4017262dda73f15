package signer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/verify"
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

// responsesCall is a model.call of the OpenAI Responses API: method
// POST creates response id, GET retrieves it (streamed or not).
func responsesCall(run, method, id string, uses ...signer.ToolUse) signer.ModelCall {
	c := modelCall(run, uses...)
	c.Provider, c.PathClass, c.Method, c.ResponseID = "openai", "responses", method, id
	return c
}

// A Responses API response is retrieved later (GET /v1/responses/{id},
// streamed or resumed with starting_after) with the uses its creating
// call (POST /v1/responses) carried, and the gateway records them again
// (attack round 10 made it, so that a resumed stream cannot hide a
// use). The agent runs and reports such a use once: the run reconciled
// it as requested twice, one of them unreported. A use a retrieve
// carries again (same response, use id, tool and arguments) is now
// counted once, listed in run.reconciled's repeated; anything else a
// retrieve carries counts, and creating calls never cancel each other.
func TestAttack10RetrieveCountsUseOnce(t *testing.T) {
	bash := func(id, cmd string) signer.ToolUse {
		return signer.ToolUse{ID: id, Name: "Bash", Args: json.RawMessage(`{"command":"` + cmd + `"}`)}
	}
	for _, tc := range []struct {
		name       string
		decided    []string // Bash commands decided
		calls      func(run string) []signer.ModelCall
		unreported int
		repeated   int
	}{
		{"created, retrieved", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "ls")), responsesCall(run, "GET", "resp_1", bash("call_1", "ls"))}
		}, 0, 1},
		{"created, retrieved twice", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "ls")),
				responsesCall(run, "GET", "resp_1", bash("call_1", "ls")), responsesCall(run, "GET", "resp_1", bash("call_1", "ls"))}
		}, 0, 2},
		{"retrieved before its creating call was recorded", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "GET", "resp_1", bash("call_1", "ls")), responsesCall(run, "POST", "resp_1", bash("call_1", "ls"))}
		}, 0, 1},
		{"background: created empty, retrieved twice", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1"),
				responsesCall(run, "GET", "resp_1", bash("call_1", "ls")), responsesCall(run, "GET", "resp_1", bash("call_1", "ls"))}
		}, 0, 1},
		{"undecided, created and retrieved: unreported once", nil, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "rm")), responsesCall(run, "GET", "resp_1", bash("call_1", "rm"))}
		}, 1, 1},
		{"a use only the retrieve carries counts", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "ls")),
				responsesCall(run, "GET", "resp_1", bash("call_1", "ls"), bash("call_2", "rm"))}
		}, 1, 1},
		{"the retrieve's use under the same id with other arguments counts", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "ls")), responsesCall(run, "GET", "resp_1", bash("call_1", "rm"))}
		}, 1, 0},
		{"another response's use with the same id and arguments counts", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "ls")), responsesCall(run, "GET", "resp_2", bash("call_1", "ls"))}
		}, 1, 0},
		{"two creating calls naming one response both count", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "ls")), responsesCall(run, "POST", "resp_1", bash("call_1", "ls")),
				responsesCall(run, "GET", "resp_1", bash("call_1", "ls"))}
		}, 1, 1},
		{"a retrieve cannot cancel a use of another creating call", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "GET", "resp_1", bash("call_1", "ls")), responsesCall(run, "POST", "resp_1", bash("call_1", "ls")),
				responsesCall(run, "POST", "resp_1", bash("call_1", "ls"))}
		}, 1, 1},
		{"no response id: each counts", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "", bash("call_1", "ls")), responsesCall(run, "GET", "", bash("call_1", "ls"))}
		}, 1, 0},
		{"no use id: each counts", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("", "ls")), responsesCall(run, "GET", "resp_1", bash("", "ls"))}
		}, 1, 0},
		{"unreadable arguments: each counts", nil, func(run string) []signer.ModelCall {
			u := signer.ToolUse{ID: "call_1", Name: "Bash", Malformed: true}
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", u), responsesCall(run, "GET", "resp_1", u)}
		}, 2, 0},
		// A stream cut in a use's arguments and resumed (starting_after):
		// the creating call's use is unreadable, the retrieve's whole;
		// the provider's response and use ids name one use, whose
		// arguments are the whole ones.
		{"cut in the use, resumed whole", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", signer.ToolUse{ID: "call_1", Name: "Bash", Malformed: true}),
				responsesCall(run, "GET", "resp_1", bash("call_1", "ls"))}
		}, 0, 1},
		{"cut in the use, resumed whole, undecided", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", signer.ToolUse{ID: "call_1", Name: "Bash", Malformed: true}),
				responsesCall(run, "GET", "resp_1", bash("call_1", "rm"))}
		}, 1, 1},
		{"whole, then a retrieve cut in the use", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", bash("call_1", "ls")),
				responsesCall(run, "GET", "resp_1", signer.ToolUse{ID: "call_1", Name: "Bash", Truncated: true})}
		}, 0, 1},
		{"an unreadable use of another tool under the id counts", []string{"ls"}, func(run string) []signer.ModelCall {
			return []signer.ModelCall{responsesCall(run, "POST", "resp_1", signer.ToolUse{ID: "call_1", Name: "Write", Malformed: true}),
				responsesCall(run, "GET", "resp_1", bash("call_1", "ls"))}
		}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			run := e.register(agentTok)
			for i, cmd := range tc.decided {
				if _, st := e.decide(agentTok, run, "c"+string(rune('1'+i)), "Bash", `{"command":"`+cmd+`"}`); st != 200 {
					t.Fatalf("decide = %d", st)
				}
			}
			calls := tc.calls(run)
			e.put(calls...)
			if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil); st != 200 {
				t.Fatalf("close = %d", st)
			}
			res, b := e.verify(run)
			if res.ModelCalls != len(calls) || res.Unreported != tc.unreported {
				t.Errorf("verify = %+v (%s), want %d model calls, %d unreported", res, res, len(calls), tc.unreported)
			}
			rec := reconciledRecord(t, b)
			if got, _ := rec.Body["repeated_count"].(int64); got != int64(tc.repeated) {
				t.Errorf("run.reconciled repeated_count = %v, want %d (%v)", rec.Body["repeated_count"], tc.repeated, rec.Body)
			}
		})
	}
}

// TestAttack10RetrieveCountsUseOnceAcrossRestart: what identifies a use
// is kept with the run's digests, so a retrieve recorded after a
// restart is still counted once.
func TestAttack10RetrieveCountsUseOnceAcrossRestart(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	e.decide(agentTok, run, "c1", "Bash", `{"command":"ls"}`)
	use := signer.ToolUse{ID: "call_1", Name: "Bash", Args: json.RawMessage(`{"command":"ls"}`)}
	e.put(responsesCall(run, "POST", "resp_1", use))
	if _, err := e.s.DrainInbox(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.close()
	e.open()
	e.put(responsesCall(run, "GET", "resp_1", use))
	e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil)
	if res, _ := e.verify(run); res.String() != "VERIFIED" || res.ModelCalls != 2 {
		t.Fatalf("after restart: %+v (%s), want 2 model calls, VERIFIED", res, res)
	}
}

// reconciledRecord is the run.reconciled record of a bundle.
func reconciledRecord(t *testing.T, b *verify.Bundle) *verify.Record {
	t.Helper()
	for _, raw := range bundleRecords(b) {
		r, err := verify.ParseRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		if r.Type == verify.TypeRunReconciled {
			return r
		}
	}
	t.Fatal("no run.reconciled")
	return nil
}
