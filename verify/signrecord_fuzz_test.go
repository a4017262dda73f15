package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
)

// FuzzSignRecordCanonical: SignRecord's spliced bytes equal
// CanonicalRecord for every record it accepts, parse back strictly and
// carry a signature that verifies.
func FuzzSignRecordCanonical(f *testing.F) {
	f.Add("custody.test/log", "r1", "call.decided", int64(0), int64(0), `{}`, int64(1764644645678))
	f.Add("custody.test/log", "r1", "z", int64(7), int64(3), `{"s":",\"time\":\"2026-01-01T00:00:00.000Z\",\"type\":\"z\",\"v\":1}"}`, int64(0))
	f.Add("a", "_log", "log.rollback_detected", int64(1<<40), int64(9), `{"time":1,"type":"x","v":[1,2],"sig":"AA=="}`, int64(-1))
	f.Add("custody.test/log", "r", "t", int64(1), int64(1), `{"\u2028":"\ud83d\ude00","n":1e21,"m":-0.5}`, int64(253402300799999))
	skey, vkey, err := note.GenerateKey(nil, "custody.test/log")
	if err != nil {
		f.Fatal(err)
	}
	sg, err := note.NewSigner(skey)
	if err != nil {
		f.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		f.Fatal(err)
	}
	_ = v
	pub := pubOf(f, vkey)
	f.Fuzz(func(t *testing.T, log, run, typ string, idx, seq int64, body string, ms int64) {
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			return
		}
		r := &verify.Record{Log: log, Index: idx, Run: run, RunSeq: seq, Type: typ,
			Time: time.UnixMilli(ms), Body: m}
		if seq > 0 {
			r.Prev = strings.Repeat("ab", 32)
		}
		raw, err := verify.SignRecord(r, sg)
		if err != nil {
			return
		}
		want, err := verify.CanonicalRecord(r)
		if err != nil {
			t.Fatalf("CanonicalRecord of a signed record: %v", err)
		}
		if !bytes.Equal(raw, want) {
			t.Fatalf("SignRecord differs from CanonicalRecord:\n got %s\nwant %s", raw, want)
		}
		back, err := verify.ParseRecord(raw)
		if err != nil {
			t.Fatalf("ParseRecord(SignRecord): %v\n%s", err, raw)
		}
		if err := verify.VerifyRecordSignature(back, pub); err != nil {
			t.Fatalf("signature: %v", err)
		}
	})
}

func pubOf(t testing.TB, vkey string) ed25519.PublicKey {
	// vkey is name+hash+base64(0x01 || pub)
	b, err := stdB64(strings.SplitN(vkey, "+", 3)[2])
	if err != nil || len(b) != 33 {
		t.Fatalf("vkey: %v", err)
	}
	return ed25519.PublicKey(b[1:])
}

func stdB64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
