package verify_test

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
)

// TestSignRecordIsCanonical: SignRecord builds the signed record from the
// signed message's canonical form with "sig" put in; it must be byte for
// byte CanonicalRecord of the signed record, whatever the body holds
// (members named like the record's own, strings that look like its tail,
// escapes, non-ASCII), and verify.
func TestSignRecordIsCanonical(t *testing.T) {
	skey, _, err := note.GenerateKey(rand.Reader, "custody.test/log")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	bodies := []map[string]any{
		{},
		{"time": "x", "type": "y", "v": 2.0, "sig": "zz"},
		{"s": `,"time":"2026-01-01T00:00:00.000Z","type":"call.decided","v":1}`},
		{"\u00e9\u4e16": "\u2028\"\\\t", "n": 1e21, "neg": -0.5, "nested": map[string]any{"a": []any{true, nil, "b"}}},
		{"args_commitment": "ab", "tool": "Bash", "effect": "allow", "rule_ids": []any{"R-1"}},
	}
	types := []string{"call.decided", "run.registered", "z", "approval.requested"}
	for i, body := range bodies {
		for j, typ := range types {
			r := &verify.Record{Log: "custody.test/log", Index: int64(i*10 + j), Run: "r1", RunSeq: int64(j),
				Prev: "", Type: typ, Time: time.Date(2026, 12, 2, 3, 4, 5, 678e6, time.UTC), Body: body}
			if j > 0 {
				r.Prev = strings.Repeat("0f", 32)
			}
			raw, err := verify.SignRecord(r, sg)
			if err != nil {
				t.Fatalf("body %d type %q: %v", i, typ, err)
			}
			want, err := verify.CanonicalRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, want) {
				t.Fatalf("body %d type %q:\n got %s\nwant %s", i, typ, raw, want)
			}
			back, err := verify.ParseRecord(raw)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !bytes.Equal(back.Sig, r.Sig) {
				t.Fatal("sig did not round-trip")
			}
		}
	}
}
