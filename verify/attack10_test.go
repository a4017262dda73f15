package verify_test

import (
	"crypto/rand"
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
