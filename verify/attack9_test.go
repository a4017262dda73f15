package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify"
)

// attack9Relabel returns cp with a copy of the signature line by from
// appended under the name to and key hash hash: note signatures and
// cosignature/v1 signatures do not cover the signer's name, so the same
// bytes verify under any name trusted with the same public key.
func attack9Relabel(t testing.TB, cp []byte, from, to string, hash uint32) []byte {
	t.Helper()
	prefix := []byte("— " + from + " ")
	for _, line := range bytes.SplitAfter(cp, []byte("\n")) {
		if !bytes.HasPrefix(line, prefix) {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSuffix(line[len(prefix):], []byte("\n"))))
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint32(raw, hash)
		return append(append([]byte(nil), cp...), "— "+to+" "+base64.StdEncoding.EncodeToString(raw)+"\n"...)
	}
	t.Fatalf("no signature by %s in %q", from, cp)
	return nil
}

// attack9Trust builds a Trust without the Marshal/ParseTrust round trip
// (which a fixed compile refuses): Verify must refuse it by itself.
func attack9Trust(t testing.TB, quorum int, ws []verify.TrustedWitness, keys ...logKey) verify.Trust {
	t.Helper()
	tr := verify.Trust{Version: verify.TrustVersion, Log: verify.TrustLog{Origin: origin}, WitnessQuorum: quorum, Witnesses: ws}
	for _, k := range keys {
		tk, err := verify.NewTrustKey(k.vkey)
		if err != nil {
			t.Fatal(err)
		}
		tr.Log.Keys = append(tr.Log.Keys, tk)
	}
	return tr
}

// TestAttack9OneKeyTwoWitnessNames: trust.json lists one witness key under
// two names. One real cosignature, relabelled with the second name and its
// key hash, verifies under both, so one key-holder met a quorum of 2. A
// quorum counts independent witnesses: a key shared by two witness names
// (or by a witness and a log key) must make the trust file invalid.
func TestAttack9OneKeyTwoWitnessNames(t *testing.T) {
	f := newFixture(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "wa.example", "wb.example"
	c, err := verify.NewCosigner(a, priv, func() time.Time { return time.Unix(1764064800, 0) })
	if err != nil {
		t.Fatal(err)
	}
	va, _ := verify.NewCosignatureVerifierKey(a, pub)
	vb, _ := verify.NewCosignatureVerifierKey(b, pub)
	tr := attack9Trust(t, 2, []verify.TrustedWitness{{Name: a, VKey: va}, {Name: b, VKey: vb}}, f.key)
	bd := clone(f.closedA)
	bd.Checkpoint = attack9Relabel(t, f.log.checkpoint(c), a, b, verify.CosignatureKeyHash(b, pub))
	res, err := verify.Verify(marshal(t, bd), tr)
	if err == nil {
		t.Fatalf("Verify() = %v with witnesses %v: one key under two names met a quorum of 2", res, res.Witnesses)
	}
	if !errors.Is(err, verify.ErrInvalidTrust) {
		t.Errorf("Verify() = %v, want ErrInvalidTrust (a key shared by two witnesses)", err)
	}
	if _, err := tr.Marshal(); !errors.Is(err, verify.ErrInvalidTrust) {
		t.Errorf("Trust{one key under two witness names}.Marshal() = %v, want ErrInvalidTrust", err)
	}
}

// TestAttack9LogKeyAsWitness: a witness trusted with a plain note key
// (0x01) that is the log key's public key under another name. The log's
// own checkpoint signature, relabelled, counts as that witness's
// cosignature: the log alone meets the quorum, which is what witnesses
// exist to prevent.
func TestAttack9LogKeyAsWitness(t *testing.T) {
	f := newFixture(t)
	pub := pubOf(t, f.key.vkey)
	const w = "wlog.example"
	id := verify.KeyID(w, pub)
	vkey := fmt.Sprintf("%s+%s+%s", w, id, base64.StdEncoding.EncodeToString(append([]byte{1}, pub...)))
	tr := attack9Trust(t, 1, []verify.TrustedWitness{{Name: w, VKey: vkey}}, f.key)
	var hash uint32
	fmt.Sscanf(id, "%08x", &hash)
	bd := clone(f.closedA)
	bd.Checkpoint = attack9Relabel(t, f.log.checkpoint(), origin, w, hash)
	res, err := verify.Verify(marshal(t, bd), tr)
	if err == nil {
		t.Fatalf("Verify() = %v with witnesses %v: the log key's own signature met the witness quorum", res, res.Witnesses)
	}
	if !errors.Is(err, verify.ErrInvalidTrust) {
		t.Errorf("Verify() = %v, want ErrInvalidTrust (a witness with a log key)", err)
	}
}

// TestAttack9HugeTreeSize: x/mod's tlog.CheckRecord never returns for a
// tree of more than 2^62 leaves (its maxpow2 loops once 1<<l overflows),
// and Verify falls back to it when its own inclusion check refuses a
// proof. A checkpoint of size 2^62+1 — signed by a log key and cosigned
// (a witness cosigns a log's first checkpoint without a proof) — with any
// wrong-length proof hung Verify forever, spinning a core. Verify must
// refuse such a checkpoint, promptly.
func TestAttack9HugeTreeSize(t *testing.T) {
	f := newFixture(t)
	text, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: origin, TreeSize: 1<<62 + 1, Root: tlogRoot(t, f)})
	if err != nil {
		// FormatCheckpoint refusing the size is the fix too; make the
		// text by hand to check the verifier.
		text = []byte(fmt.Sprintf("%s\n%d\n%s\n", origin, int64(1<<62+1), base64.StdEncoding.EncodeToString(make([]byte, 32))))
	}
	msg, err := note.Sign(&note.Note{Text: string(text)}, f.key.signer, f.w1.signer, f.w2.signer)
	if err != nil {
		t.Fatal(err)
	}
	b := clone(f.closedA)
	b.Checkpoint = msg
	done := make(chan error, 1)
	go func() {
		_, err := verify.Verify(marshal(t, b), f.trust)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, verify.ErrMalformedCheckpoint) {
			t.Errorf("Verify(checkpoint of size 2^62+1) = %v, want ErrMalformedCheckpoint", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Verify(checkpoint of size 2^62+1) did not return within 10s (tlog.CheckRecord loops)")
	}
}

func tlogRoot(t testing.TB, f *fixture) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(f.log.Size(), f.log.reader())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestAttack9BundleBytesHeld: byte-level edits of a valid bundle — a BOM,
// CRLF, NUL, invalid UTF-8, escaped or re-spelled members and numbers
// that decode to the signed values, trailing data after a record or after
// the checkpoint — are each refused with a refusal sentinel, never
// verified and never a panic.
func TestAttack9BundleBytesHeld(t *testing.T) {
	f := newFixture(t)
	good := marshal(t, f.closedA)
	if _, err := verify.Verify(good, f.trust); err != nil {
		t.Fatal(err)
	}
	rec := f.closedA.Records[1].Record
	edit := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte {
			if !bytes.Contains(b, []byte(old)) {
				t.Fatalf("%q not in bundle", old)
			}
			return bytes.Replace(b, []byte(old), []byte(new), 1)
		}
	}
	recEdit := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte {
			if !bytes.Contains(rec, []byte(old)) {
				t.Fatalf("%q not in record", old)
			}
			return bytes.Replace(b, rec, bytes.Replace(rec, []byte(old), []byte(new), 1), 1)
		}
	}
	idx := fmt.Sprintf(`"index":%d`, 2)
	tests := []struct {
		name string
		mut  func([]byte) []byte
	}{
		{"BOM", func(b []byte) []byte { return append([]byte("\ufeff"), b...) }},
		{"CRLF", func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }},
		{"NUL after record", recEdit(`"v":1}`, "\"v\":1}\x00")},
		{"space after record", recEdit(`"v":1}`, `"v":1} `)},
		{"second object after record", recEdit(`"v":1}`, `"v":1}{}`)},
		{"escaped member name", recEdit(`"type":`, `"\u0074ype":`)},
		{"escaped value", recEdit(`"run-a"`, `"run\u002da"`)},
		{"duplicate index", recEdit(idx, idx+`,"index":2`)},
		{"index 2.0", recEdit(idx, `"index":2.0`)},
		{"index 2e0", recEdit(idx, `"index":2e0`)},
		{"index 02", recEdit(idx, `"index":02`)},
		{"index -0", recEdit(`"run_seq":1`, `"run_seq":-0`)},
		{"invalid UTF-8 in run", recEdit(`"run-a"`, "\"run-a\xff\"")},
		{"overlong UTF-8", recEdit(`"run-a"`, "\"run-\xc1\xa1\"")},
		{"raw NUL in string", recEdit(`"run-a"`, "\"run-a\x00\"")},
		{"raw tab in record", recEdit(`,"index"`, "\t,\"index\"")},
		{"junk after checkpoint", func(b []byte) []byte { return append(b, "junk\n"...) }},
		{"blank line after checkpoint", func(b []byte) []byte { return append(b, '\n') }},
		{"checkpoint size with leading zero", edit("\n8\n", "\n08\n")},
		{"checkpoint size with plus", edit("\n8\n", "\n+8\n")},
		{"K section before R", func(b []byte) []byte { return bytes.Replace(b, []byte("\nR\t"), []byte("\nK\t"), 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mut(bytes.Clone(good))
			res, err := verify.Verify(b, f.trust)
			if err == nil {
				t.Fatalf("Verify() = %v, want a refusal", res)
			}
			if !errors.Is(err, verify.ErrRefused) {
				t.Errorf("Verify() = %v, want an error wrapping ErrRefused", err)
			}
		})
	}
}

// TestAttack9WitnessLinesHeld: a cosignature line by a trusted witness
// repeated (identical or with another timestamp), or under the witness's
// name with a colliding-looking key hash of another key, counts once or
// not at all; a quorum of 2 is not met by one witness.
func TestAttack9WitnessLinesHeld(t *testing.T) {
	f := newFixture(t)
	cp := f.log.checkpoint(f.w1.signer)
	// The same witness's line twice, then relabelled under w2's name
	// (w2's key differs, so it must not verify).
	w1line := cp[bytes.LastIndex(cp[:len(cp)-1], []byte("\n"))+1:]
	for _, c := range [][]byte{
		append(bytes.Clone(cp), w1line...),
		attack9Relabel(t, cp, f.w1.name, f.w2.name, keyHashOf(t, f.w2.vkey)),
	} {
		b := clone(f.closedA)
		b.Checkpoint = c
		res, err := verify.Verify(marshal(t, b), f.trust)
		var qe *verify.WitnessQuorumError
		if !errors.As(err, &qe) || len(qe.Valid) != 1 {
			t.Errorf("Verify(%q) = %v, %v; want a WitnessQuorumError with one valid witness", c, res.Witnesses, err)
		}
	}
}

func keyHashOf(t testing.TB, vkey string) uint32 {
	t.Helper()
	var h uint32
	parts := bytes.SplitN([]byte(vkey), []byte("+"), 3)
	if len(parts) != 3 {
		t.Fatalf("vkey %q", vkey)
	}
	if _, err := fmt.Sscanf(string(parts[1]), "%08x", &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestAttack9ParsersNoPanicHeld: the exported parsers answer hostile input
// with an error that names the problem and never panic.
func TestAttack9ParsersNoPanicHeld(t *testing.T) {
	inputs := []string{
		"", "\x00", "\ufeff{}", "+", "++", "a+b+c", "a+00000000+", "a+00000000+AQ==",
		"a+zzzzzzzz+" + base64.StdEncoding.EncodeToString(make([]byte, 33)),
		"a+00000000+" + base64.StdEncoding.EncodeToString(append([]byte{4}, make([]byte, 32)...)),
		"a+00000000+" + base64.StdEncoding.EncodeToString(append([]byte{9}, make([]byte, 32)...)),
		"{\"version\":1,\"log\":null}", "{\"version\":1,\"log\":{\"keys\":[null]}}",
		"{\"version\":1,\"log\":{\"origin\":\"o\",\"keys\":[{}]},\"witnesses\":[null],\"witness_quorum\":1}",
		"{\"version\":1,\"log\":{\"origin\":\"o\",\"keys\":[]},\"witness_quorum\":-1}",
		"o\n9223372036854775807\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n",
		"o\n4611686018427387905\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n",
		"custody-bundle-v1\n{\"closed\":false,\"run\":\"r\",\"v\":1}\nR\t{}\t\t\n\n",
		"custody-bundle-v1\n{\"closed\":false,\"run\":\"r\",\"v\":1}\nR\t\n\nx",
		"custody-bundle-v1\n{\"closed\":false,\"run\":\"r\",\"v\":1}\n\n",
		strings.Repeat("[", 100000), strings.Repeat("{\"a\":", 1000) + "1" + strings.Repeat("}", 1000),
	}
	f := newFixture(t)
	for _, in := range inputs {
		b := []byte(in)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("panic on %.60q: %v", in, p)
				}
			}()
			if _, err := verify.ParseTrust(b); err == nil {
				t.Errorf("ParseTrust(%.60q) accepted", in)
			}
			if _, err := verify.NewWitnessVerifier(in); err == nil {
				t.Errorf("NewWitnessVerifier(%.60q) accepted", in)
			}
			if _, err := verify.NewTrustKey(in); err == nil {
				t.Errorf("NewTrustKey(%.60q) accepted", in)
			}
			verify.ParseCheckpoint(b)
			verify.ParseBundle(b)
			verify.ParseRecord(b)
			verify.CanonicalizeJSON(b)
			var v map[string]any
			verify.DecodeJSON(b, &v)
			if _, err := verify.Verify(b, f.trust); err == nil || err.Error() == "" {
				t.Errorf("Verify(%.60q) = %v", in, err)
			}
		}()
	}
}

// TestAttack9ReservedRunIDs: run ids starting with "_" are the log's; only
// "_log" is one. The signer never makes another (internal/signer refuses
// them), so a record of such a run is malformed, signed or parsed.
func TestAttack9ReservedRunIDs(t *testing.T) {
	skey, _, err := note.GenerateKey(rand.Reader, "custody.test/log")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(run string) *verify.Record {
		return &verify.Record{Log: "custody.test/log", Index: 3, Run: run, Type: "call.decided",
			Time: time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC), Body: map[string]any{}}
	}
	for _, run := range []string{"_", "_other", "_log_", "_LOG"} {
		if _, err := verify.SignRecord(rec(run), sg); err == nil {
			t.Errorf("SignRecord run %q: signed", run)
		}
	}
	raw, err := verify.SignRecord(rec(verify.LogRun), sg)
	if err != nil {
		t.Fatalf("SignRecord run %q: %v", verify.LogRun, err)
	}
	if _, err := verify.ParseRecord(raw); err != nil {
		t.Fatalf("ParseRecord run %q: %v", verify.LogRun, err)
	}
	edited := bytes.Replace(raw, []byte(`"run":"_log"`), []byte(`"run":"_lox"`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatal("test did not edit the run")
	}
	if _, err := verify.ParseRecord(edited); !errors.Is(err, verify.ErrMalformedRecord) {
		t.Fatalf("ParseRecord run _lox: %v, want ErrMalformedRecord", err)
	}
}

// TestAttack9ReconcileCountOverflow: counts are at most 2^53-1, but 2049
// model.call records each dropping 2^53-1 tool uses sum past 2^63; before
// the sum was checked it wrapped to 2^53-2049, and a run.reconciled
// claiming that many tool uses reconciled.
func TestAttack9ReconcileCountOverflow(t *testing.T) {
	const calls = 2049
	const maxCount = int64(1)<<53 - 1
	key := newKey(t, origin)
	w := newWitness(t, "w1.example")
	l := newTestLog(t, origin, key)
	l.add("run-o", verify.TypeRunRegistered, nil)
	for range calls {
		l.add("run-o", verify.TypeModelCall, map[string]any{"tool_uses": []any{}, "tool_uses_dropped": maxCount})
	}
	c, m := uint64(calls), uint64(maxCount)
	wrapped := int64(c * m) // 2^64 + 2^53 - 2049, wrapped
	if wrapped < 0 || wrapped > maxCount {
		t.Fatalf("test arithmetic: %d", wrapped)
	}
	l.add("run-o", verify.TypeRunReconciled, map[string]any{
		"model_calls": int64(calls), "tool_uses": wrapped, "decided_calls": int64(0),
		"unreported_count": int64(0), "unreported": []any{}, "unreadable_responses": int64(0),
	})
	l.add("run-o", verify.TypeRunClosing, map[string]any{"reason": "exited"})
	raw := marshal(t, l.bundle("run-o", true, l.checkpoint(w.signer)))
	_, err := verify.Verify(raw, newTrust(t, origin, 1, []witness{w}, key))
	if !errors.Is(err, verify.ErrReconcile) {
		t.Fatalf("Verify: %v, want ErrReconcile", err)
	}
}
