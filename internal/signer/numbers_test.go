package signer_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentcustody/custody/verify"
)

// TestDecideFloatArgs: a call whose arguments hold numbers other than
// integers (issue 8: it answered 400 and nothing was recorded) is decided,
// recorded, exported and verifies; the revealed salt opens its commitment
// with the arguments as the agent wrote them; an approval bound to such
// arguments is consumed with the same numbers spelled otherwise; a number
// a double cannot hold as written is still refused, unrecorded.
func TestDecideFloatArgs(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	args := `{"b":1,"a":[1.0,"é",1e21]}`
	d, st := e.decide(agentTok, run, "c1", "Bash", args)
	if st != 200 || d.Effect != "allow" || d.ArgsCommitment == "" {
		t.Fatalf("decide(%s) = %d %+v, want 200 allow", args, st, d)
	}
	canon, err := verify.CanonicalizeJSON([]byte(args))
	if err != nil || string(canon) != `{"a":[1,"é",1e+21],"b":1}` {
		t.Fatalf("CanonicalizeJSON(%s) = %s, %v", args, canon, err)
	}

	var eb map[string]any
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/decide",
		map[string]any{"call_id": "c2", "tool": "Bash", "args": json.RawMessage(`{"id":9007199254740993}`)}, &eb); st != 400 {
		t.Fatalf("decide with 9007199254740993 = %d %v, want 400", st, eb)
	}

	ask, st := e.decide(agentTok, run, "c3", "Deploy", `{"replicas":3.0,"ratio":0.25,"max":1E+21}`)
	if st != 200 || ask.Effect != "ask" {
		t.Fatalf("decide Deploy = %d %+v, want ask", st, ask)
	}
	p := "/v1/signer/runs/" + run + "/approvals"
	var ap struct {
		ID string `json:"approval_id"`
	}
	if st := e.call(e.api, agentTok, "POST", p, map[string]any{"call_id": "c3", "tool": "Deploy",
		"args": json.RawMessage(`{"max":1e21,"ratio":25e-2,"replicas":3}`)}, &ap); st != 201 {
		t.Fatalf("request approval = %d", st)
	}
	if st := e.call(e.admin, "", "POST", "/v1/signer/approvals/"+ap.ID+"/approve", nil, nil); st != 200 {
		t.Fatalf("approve = %d", st)
	}
	if st := e.call(e.api, agentTok, "POST", p+"/"+ap.ID+"/consume",
		map[string]any{"args": json.RawMessage(`{"ratio":0.250,"replicas":30e-1,"max":1000000000000000000000}`)}, &eb); st != 200 {
		t.Fatalf("consume with the same numbers spelled otherwise = %d %v", st, eb)
	}
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil); st != 200 {
		t.Fatalf("close = %d", st)
	}

	res, b := e.verify(run)
	if res.String() != "VERIFIED" {
		t.Fatalf("Verify = %q, want VERIFIED", res)
	}
	var decided *verify.Record
	var index int64
	for _, r := range b.Records {
		rec, err := verify.ParseRecord(r.Record)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Body["call_id"] == "c2" {
			t.Errorf("the refused call was recorded: %s", r.Record)
		}
		if rec.Type == verify.TypeCallDecided && rec.Body["call_id"] == "c1" {
			decided, index = rec, rec.Index
		}
	}
	if decided == nil || decided.Body["args_commitment"] != d.ArgsCommitment {
		t.Fatalf("call.decided for c1 = %+v, want commitment %s", decided, d.ArgsCommitment)
	}
	var salt struct {
		Salt string `json:"salt"`
	}
	if st := e.call(e.admin, "", "GET", fmt.Sprintf("/v1/signer/records/%d/salt", index), nil, &salt); st != 200 {
		t.Fatalf("salt = %d", st)
	}
	raw, _ := base64.StdEncoding.DecodeString(salt.Salt)
	if err := verify.VerifyArgsReveal(d.ArgsCommitment, raw, []byte(args)); err != nil {
		t.Errorf("VerifyArgsReveal(%s) = %v", args, err)
	}
	if err := verify.VerifyArgsReveal(d.ArgsCommitment, raw, []byte(`{"b":1,"a":[1.5,"é",1e21]}`)); err == nil {
		t.Error("VerifyArgsReveal with another number opened the commitment")
	}
}
