package verify_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
)

func attack10Signer(t *testing.T) note.Signer {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, "custody.test/log")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

// TestAttack10SignRecordDeepBody: a body that Parse accepts (nesting up to
// 64 counted from the body) sits one level deeper in its record. SignRecord
// signed bodies whose record nested 65 deep, which ParseRecord (and every
// verifier) refuses: the signer wrote a record that made its own log
// unverifiable. Whatever SignRecord signs, ParseRecord must read; the rest
// SignRecord refuses.
func TestAttack10SignRecordDeepBody(t *testing.T) {
	sg := attack10Signer(t)
	for n := 60; n <= 66; n++ { // containers in the body, the body included
		var v any = []any{}
		for range n - 2 {
			v = []any{v}
		}
		r := &verify.Record{Log: "custody.test/log", Run: "r1", Type: "call.decided",
			Time: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), Body: map[string]any{"a": v}}
		raw, err := verify.SignRecord(r, sg)
		if err != nil {
			if n < 64 {
				t.Errorf("SignRecord(body nested %d deep) = %v", n, err)
			}
			continue
		}
		if _, err := verify.ParseRecord(raw); err != nil {
			t.Errorf("SignRecord(body nested %d deep) signed a record ParseRecord refuses: %v", n, err)
		}
	}
}

// TestAttack10SignRecordInvalidUTF8Body: a body map holding a string that
// is not valid UTF-8 was signed with the bytes as they are, a record
// ParseRecord refuses (ErrUTF8). Whatever SignRecord signs, ParseRecord
// must read.
func TestAttack10SignRecordInvalidUTF8Body(t *testing.T) {
	sg := attack10Signer(t)
	for _, body := range []map[string]any{{"s": "a\xffb"}, {"\xfe": "x"}, {"l": []any{"\xed\xa0\x80"}}} {
		r := &verify.Record{Log: "custody.test/log", Run: "r1", Type: "call.decided",
			Time: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), Body: body}
		raw, err := verify.SignRecord(r, sg)
		if err != nil {
			continue
		}
		if _, err := verify.ParseRecord(raw); err != nil {
			t.Errorf("SignRecord(%q) signed a record ParseRecord refuses: %v", body, err)
		}
	}
}

// A use a Responses API retrieve (model.call method GET) carries again
// is counted once by the signer and listed in run.reconciled's repeated
// with the use it repeats. Verify checks offline what the records show
// of each claim (the arguments are salted apart): the repeat is a
// retrieve's use, the use it repeats is another use of the run, both
// name one response and one use id, tool and readable arguments, and
// no use is both repeated and unreported, so a signer (or whoever
// rewrote run.reconciled) cannot pass an unreported use off as repeated.
func TestAttack10ReconciledRepeatedChecked(t *testing.T) {
	use := func(id, name string) map[string]any {
		m := map[string]any{"name": name, "args_commitment": strings.Repeat("ab", 32)}
		if id != "" {
			m["id"] = id
		}
		return m
	}
	call := func(method, resp string, uses ...any) map[string]any {
		m := map[string]any{"provider": "openai", "path_class": "responses", "method": method, "tool_uses": uses}
		if resp != "" {
			m["response_id"] = resp
		}
		return m
	}
	build := func(t *testing.T, calls []map[string]any, edit func(b map[string]any, idx []int64)) ([]byte, verify.Trust) {
		key := newKey(t, origin)
		w := newWitness(t, "w1.example")
		l := newTestLog(t, origin, key)
		l.add("run-r", verify.TypeRunRegistered, nil)
		var idx []int64
		uses := int64(0)
		for _, c := range calls {
			idx = append(idx, l.add("run-r", verify.TypeModelCall, c))
			uses += int64(len(c["tool_uses"].([]any)))
		}
		b := map[string]any{
			"model_calls": int64(len(calls)), "tool_uses": uses, "decided_calls": int64(1),
			"unreported_count": int64(0), "unreported": []any{}, "unreadable_responses": int64(0),
			"repeated_count": int64(1),
			"repeated":       []any{map[string]any{"index": idx[1], "pos": int64(0), "tool": "Bash", "of_index": idx[0], "of_pos": int64(0)}},
		}
		if edit != nil {
			edit(b, idx)
		}
		l.add("run-r", verify.TypeRunReconciled, b)
		l.add("run-r", verify.TypeRunClosing, map[string]any{"reason": "closed"})
		return marshal(t, l.bundle("run-r", true, l.checkpoint(w.signer))), newTrust(t, origin, 1, []witness{w}, key)
	}
	created := call("POST", "resp_1", use("call_1", "Bash"))
	retrieved := call("GET", "resp_1", use("call_1", "Bash"))
	for name, calls := range map[string][]map[string]any{
		"valid":                       {created, retrieved},
		"valid: cut, resumed":         {call("POST", "resp_1", map[string]any{"name": "Bash", "id": "call_1", "malformed": true}), retrieved},
		"valid: a retrieve cut in it": {created, call("GET", "resp_1", map[string]any{"name": "Bash", "id": "call_1", "truncated": true})},
	} {
		t.Run(name, func(t *testing.T) {
			raw, tr := build(t, calls, func(b map[string]any, idx []int64) {
				if _, ok := calls[0]["tool_uses"].([]any)[0].(map[string]any)["args_commitment"]; !ok { // the creating call's use repeats the retrieve's
					r := b["repeated"].([]any)[0].(map[string]any)
					r["index"], r["of_index"] = idx[0], idx[1]
				}
			})
			res, err := verify.Verify(raw, tr)
			if err != nil || res.Unreported != 0 || res.Repeated != 1 {
				t.Fatalf("Verify = %+v, %v; want verified, 1 repeated, none unreported", res, err)
			}
		})
	}
	repeat := func(b map[string]any) map[string]any { return b["repeated"].([]any)[0].(map[string]any) }
	for _, tc := range []struct {
		name  string
		calls []map[string]any
		edit  func(b map[string]any, idx []int64)
	}{
		{"the repeat is a creating call's use", []map[string]any{created, call("POST", "resp_1", use("call_1", "Bash"))}, nil},
		{"another response", []map[string]any{created, call("GET", "resp_2", use("call_1", "Bash"))}, nil},
		{"no response id", []map[string]any{call("POST", "", use("call_1", "Bash")), call("GET", "", use("call_1", "Bash"))}, nil},
		{"another use id", []map[string]any{created, call("GET", "resp_1", use("call_2", "Bash"))}, nil},
		{"no use id", []map[string]any{call("POST", "resp_1", use("", "Bash")), call("GET", "resp_1", use("", "Bash"))}, nil},
		{"another tool", []map[string]any{created, call("GET", "resp_1", use("call_1", "Write"))}, nil},
		{"repeats unreadable arguments", []map[string]any{call("POST", "resp_1", map[string]any{"name": "Bash", "id": "call_1", "malformed": true}), retrieved}, func(b map[string]any, idx []int64) {
			repeat(b)["index"], repeat(b)["of_index"] = idx[1], idx[0]
		}},
		{"repeats itself", []map[string]any{created, retrieved}, func(b map[string]any, idx []int64) { repeat(b)["of_index"] = idx[1] }},
		{"names no use", []map[string]any{created, retrieved}, func(b map[string]any, idx []int64) { repeat(b)["of_pos"] = int64(1) }},
		{"also unreported", []map[string]any{created, retrieved}, func(b map[string]any, idx []int64) {
			b["unreported_count"], b["unreported"] = int64(1), []any{map[string]any{"index": idx[1], "pos": int64(0), "tool": "Bash"}}
		}},
		{"listed twice", []map[string]any{created, retrieved}, func(b map[string]any, idx []int64) {
			b["repeated_count"], b["repeated"] = int64(2), []any{repeat(b), repeat(b)}
		}},
		{"count under the list", []map[string]any{created, retrieved}, func(b map[string]any, idx []int64) { b["repeated_count"] = int64(0) }},
		{"list without a count", []map[string]any{created, retrieved}, func(b map[string]any, idx []int64) { delete(b, "repeated_count") }},
		{"more repeated and unreported than uses", []map[string]any{created, retrieved}, func(b map[string]any, idx []int64) {
			b["unreported_count"] = int64(2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, tr := build(t, tc.calls, tc.edit)
			if res, err := verify.Verify(raw, tr); !errors.Is(err, verify.ErrReconcile) {
				t.Fatalf("Verify = %+v, %v; want ErrReconcile", res, err)
			}
		})
	}
}
