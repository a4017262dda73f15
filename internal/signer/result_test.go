package signer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/verify"
)

// A completion with a result records only a salted commitment to it
// (result_commitment), which the stored salt opens; without a result the
// record is as before; a result that is not JSON is refused.
func TestCompleteResult(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	run := e.register(agentTok)
	for _, c := range []string{"c1", "c2"} {
		if d, st := e.decide(agentTok, run, c, "Bash", `{"command":"ls"}`); st != 200 || d.Effect != "allow" {
			t.Fatalf("decide %s = %d %+v", c, st, d)
		}
	}
	result := `{"content":[{"type":"text","text":"secret output"}],"isError":false}`
	a, err := e.s.Complete(ctx, identity(), run, signer.CompleteRequest{CallID: "c1", Outcome: "ok", Result: json.RawMessage(result)})
	if err != nil {
		t.Fatalf("Complete with result: %v", err)
	}
	if _, err := e.s.Complete(ctx, identity(), run, signer.CompleteRequest{CallID: "c2", Outcome: "ok"}); err != nil {
		t.Fatalf("Complete without result: %v", err)
	}
	if _, err := e.s.Complete(ctx, identity(), run, signer.CompleteRequest{CallID: "c2", Outcome: "ok", Result: json.RawMessage(`{"a":`)}); !errors.Is(err, signer.ErrInvalid) {
		t.Errorf("Complete with a malformed result = %v, want ErrInvalid", err)
	}

	res, b := e.verify(run)
	if res.String() != "VERIFIED TO HEAD 4 (open)" {
		t.Fatalf("Verify = %q", res)
	}
	var withResult, without *verify.Record
	for _, r := range b.Records {
		rec, _ := verify.ParseRecord(r.Record)
		if rec.Type == verify.TypeCallCompleted {
			if rec.Body["call_id"] == "c1" {
				withResult = rec
			} else {
				without = rec
			}
		}
	}
	if withResult == nil || without == nil {
		t.Fatal("missing call.completed records")
	}
	if _, ok := without.Body["result_commitment"]; ok {
		t.Errorf("completion without result: body %v has result_commitment", without.Body)
	}
	c, _ := withResult.Body["result_commitment"].(string)
	if c == "" || withResult.Index != a.Index {
		t.Fatalf("completion body = %v (index %d, want %d), want a result_commitment", withResult.Body, withResult.Index, a.Index)
	}
	raw, _ := json.Marshal(withResult.Body)
	if json.Valid(raw) && containsBytes(raw, "secret output") {
		t.Errorf("record carries the result: %s", raw)
	}
	salt, err := e.s.RevealSalt(ctx, a.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.VerifyArgsReveal(c, salt, []byte(result)); err != nil {
		t.Errorf("reveal of the result: %v", err)
	}
	if err := verify.VerifyArgsReveal(c, salt, []byte(`{"content":[],"isError":false}`)); !errors.Is(err, verify.ErrArgsMismatch) {
		t.Errorf("reveal of another result = %v, want ErrArgsMismatch", err)
	}
}

// MayAllow follows the tenant policy (allowBash: Bash allowed, Deploy
// asked, everything else denied by default); an unknown tenant has only
// the built-in rules and the deny default.
func TestMayAllow(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		tenant, tool string
		want         bool
	}{
		{"agents", "Bash", true}, {"agents", "Deploy", true}, {"agents", "Other", false}, {"nobody", "Bash", false},
	} {
		if got, err := e.s.MayAllow(context.Background(), tc.tenant, tc.tool); err != nil || got != tc.want {
			t.Errorf("MayAllow(%s, %s) = %v, %v, want %v", tc.tenant, tc.tool, got, err, tc.want)
		}
	}
}

func containsBytes(b []byte, s string) bool { return strings.Contains(string(b), s) }
