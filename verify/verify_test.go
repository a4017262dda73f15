package verify_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
	"github.com/agentcustody/custody/verify/internal/jcs"
)

const origin = "signer.custody.example/log"

type fixture struct {
	log     *testLog
	key     logKey
	w1, w2  witness
	trust   verify.Trust
	cp      []byte // checkpoint cosigned by w1 and w2
	closedA *verify.Bundle
	openB   *verify.Bundle
}

// newFixture builds a log where run "run-a" (closed) and "run-b" (open)
// interleave, and a checkpoint cosigned by the two trusted witnesses.
func newFixture(t testing.TB) *fixture {
	f := &fixture{key: newKey(t, origin), w1: newWitness(t, "w1.example"), w2: newWitness(t, "w2.example")}
	f.trust = newTrust(t, origin, 2, []witness{f.w1, f.w2}, f.key)
	l := newTestLog(t, origin, f.key)
	f.log = l
	l.add("run-a", verify.TypeRunRegistered, map[string]any{"identity": map[string]any{"service_account": "system:serviceaccount:agents:a"}})
	l.add("run-b", verify.TypeRunRegistered, nil)
	l.add("run-a", verify.TypeCallDecided, map[string]any{"tool": "Bash", "effect": "allow", "rules": []any{}, "args_commitment": strings.Repeat("ab", 32)})
	l.add("run-a", verify.TypeCallCompleted, map[string]any{"call": "c1"})
	l.add("run-b", verify.TypeCallDecided, map[string]any{"tool": "WebFetch", "effect": "deny", "rules": []any{"TK-S001", "TK-N001"}})
	l.add("run-a", verify.TypeCallDecided, map[string]any{"tool": "WebFetch", "effect": "deny", "note": "\u20ac \U0001F600 \"q\" \\ \n"})
	l.add("run-a", verify.TypeRunClosing, map[string]any{"reason": "idle_timeout"})
	l.add("run-b", verify.TypeModelEvent, map[string]any{"tokens": int64(1) << 52})
	f.cp = l.checkpoint(f.w1.signer, f.w2.signer)
	f.closedA = l.bundle("run-a", true, f.cp)
	f.openB = l.bundle("run-b", false, f.cp)
	return f
}

// editRecord rewrites a canonical record's JSON without re-signing it.
func editRecord(t testing.TB, raw []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	v, err := jcs.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	edit(v.(map[string]any))
	out, err := jcs.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func clone(b *verify.Bundle) *verify.Bundle {
	c := *b
	c.Records = slices.Clone(b.Records)
	c.KeyRecords = slices.Clone(b.KeyRecords)
	return &c
}

func TestVerify(t *testing.T) {
	f := newFixture(t)
	fresh := newKey(t, origin)
	tests := []struct {
		name    string
		bundle  func(t *testing.T) []byte
		want    string // result on success
		wantErr error
	}{
		{"closed run", func(t *testing.T) []byte { return marshal(t, f.closedA) }, "VERIFIED", nil},
		{"open run", func(t *testing.T) []byte { return marshal(t, f.openB) }, "VERIFIED TO HEAD 2 (open)", nil},
		{"closed run not claimed closed", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Header.Closed = false
			return marshal(t, b)
		}, "VERIFIED", nil},
		{"truncated tail not claimed closed reads as open", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Header.Closed = false
			b.Records = b.Records[:3]
			return marshal(t, b)
		}, "VERIFIED TO HEAD 2 (open)", nil},
		{"keys in bundle are informational", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Header.Keys = []verify.BundleKey{{KeyID: "00000000", PublicKey: "AAAA"}}
			return marshal(t, b)
		}, "VERIFIED", nil},
		{"deleted middle record", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records = slices.Delete(b.Records, 2, 3)
			return marshal(t, b)
		}, "", verify.ErrSequence},
		{"deleted tail claimed closed", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records = b.Records[:4]
			return marshal(t, b)
		}, "", verify.ErrNotClosed},
		{"records swapped", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[1], b.Records[2] = b.Records[2], b.Records[1]
			return marshal(t, b)
		}, "", verify.ErrSequence},
		{"records renumbered", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records = slices.Delete(b.Records, 2, 3)
			for i := 2; i < len(b.Records); i++ {
				b.Records[i].Record = editRecord(t, b.Records[i].Record, func(m map[string]any) { m["run_seq"] = int64(i) })
			}
			return marshal(t, b)
		}, "", verify.ErrChain},
		{"one record renumbered in place", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[0].Record = editRecord(t, b.Records[0].Record, func(m map[string]any) { m["run_seq"] = int64(0); m["index"] = int64(1) })
			return marshal(t, b)
		}, "", verify.ErrRecordSignature},
		{"renumbered and re-signed with the log key", func(t *testing.T) []byte {
			b := clone(f.closedA)
			r1, _ := verify.ParseRecord(b.Records[1].Record)
			r3, _ := verify.ParseRecord(b.Records[3].Record)
			r3.RunSeq, r3.Prev = 2, verify.ChainHash(b.Records[1].Record)
			raw, err := verify.SignRecord(r3, f.key.signer)
			if err != nil {
				t.Fatal(err)
			}
			_ = r1
			b.Records = []verify.BundleRecord{b.Records[0], b.Records[1], {Record: raw, Proof: b.Records[3].Proof}}
			return marshal(t, b)
		}, "", verify.ErrInclusion},
		{"record spliced from another run", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records = slices.Insert(b.Records, 2, f.openB.Records[1])
			return marshal(t, b)
		}, "", verify.ErrRunMismatch},
		{"re-signed with a fresh key", func(t *testing.T) []byte {
			l := newTestLog(t, origin, fresh)
			for _, r := range f.closedA.Records {
				rec, _ := verify.ParseRecord(r.Record)
				l.add(rec.Run, rec.Type, rec.Body)
			}
			return marshal(t, l.bundle("run-a", true, l.checkpoint(f.w1.signer, f.w2.signer)))
		}, "", verify.ErrCheckpointSignature},
		{"records re-signed with a fresh key", func(t *testing.T) []byte {
			b := clone(f.closedA)
			rec, _ := verify.ParseRecord(b.Records[1].Record)
			raw, err := verify.SignRecord(rec, fresh.signer)
			if err != nil {
				t.Fatal(err)
			}
			b.Records[1].Record = raw
			return marshal(t, b)
		}, "", verify.ErrUnknownKey},
		{"checkpoint without cosignatures", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Checkpoint = f.log.checkpoint()
			return marshal(t, b)
		}, "", verify.ErrWitnessQuorum},
		{"checkpoint with one of two cosignatures", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Checkpoint = f.log.checkpoint(f.w1.signer)
			return marshal(t, b)
		}, "", verify.ErrWitnessQuorum},
		{"checkpoint cosigned by an untrusted witness", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Checkpoint = f.log.checkpoint(f.w1.signer, newWitness(t, "w2.example").signer)
			return marshal(t, b)
		}, "", verify.ErrWitnessQuorum},
		{"checkpoint with a duplicated cosignature", func(t *testing.T) []byte {
			b := clone(f.closedA)
			cp := f.log.checkpoint(f.w1.signer)
			lines := strings.SplitAfter(string(cp), "\n")
			b.Checkpoint = []byte(string(cp) + lines[len(lines)-2])
			return marshal(t, b)
		}, "", verify.ErrWitnessQuorum},
		{"checkpoint signed only by a witness", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Checkpoint = f.log.checkpointAt(f.log.Size(), origin, f.w1.signer, f.w2.signer)
			return marshal(t, b)
		}, "", verify.ErrCheckpointSignature},
		{"checkpoint with tampered root", func(t *testing.T) []byte {
			b := clone(f.closedA)
			cp := bytes.Clone(f.cp)
			i := bytes.IndexByte(cp[len(origin)+1:], '\n') + len(origin) + 2
			cp[i] ^= 1
			b.Checkpoint = cp
			return marshal(t, b)
		}, "", verify.ErrCheckpointSignature},
		{"checkpoint for another origin", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Checkpoint = f.log.checkpointAt(f.log.Size(), "other.example/log", f.key.signer, f.w1.signer, f.w2.signer)
			return marshal(t, b)
		}, "", verify.ErrCheckpointOrigin},
		{"older checkpoint not covering the records", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Checkpoint = f.log.checkpointAt(4, origin, f.key.signer, f.w1.signer, f.w2.signer)
			return marshal(t, b)
		}, "", verify.ErrInclusion},
		{"zero records", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records = nil
			return marshal(t, b)
		}, "", verify.ErrNoRecords},
		{"run starting past run_seq 0", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records = b.Records[1:]
			return marshal(t, b)
		}, "", verify.ErrSequence},
		{"tampered body", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[2].Record = editRecord(t, b.Records[2].Record, func(m map[string]any) {
				m["body"].(map[string]any)["effect"] = "allow"
			})
			return marshal(t, b)
		}, "", verify.ErrRecordSignature},
		{"bad inclusion proof", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[2].Proof = slices.Clone(b.Records[2].Proof)
			b.Records[2].Proof[0][0] ^= 1
			return marshal(t, b)
		}, "", verify.ErrInclusion},
		{"duplicate JSON key in a record", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[1].Record = bytes.Replace(b.Records[1].Record, []byte(`{"body":{`), []byte(`{"body":{"x":1,"x":1,`), 1)
			return marshal(t, b)
		}, "", verify.ErrDuplicateKey},
		{"integer beyond 2^53 in a record", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[1].Record = bytes.Replace(b.Records[1].Record, []byte(`{"body":{`), []byte(`{"body":{"n":9007199254740993,`), 1)
			return marshal(t, b)
		}, "", verify.ErrNumber},
		{"lone surrogate in a record", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[1].Record = bytes.Replace(b.Records[1].Record, []byte(`{"body":{`), []byte(`{"body":{"s":"\ud800",`), 1)
			return marshal(t, b)
		}, "", verify.ErrSurrogate},
		{"non-canonical record", func(t *testing.T) []byte {
			b := clone(f.closedA)
			b.Records[1].Record = bytes.Replace(b.Records[1].Record, []byte(`{"body":`), []byte(`{ "body":`), 1)
			return marshal(t, b)
		}, "", verify.ErrNotCanonical},
		{"garbage container", func(t *testing.T) []byte { return []byte("not a bundle") }, "", verify.ErrMalformedBundle},
		{"header with a case-folded duplicate of run", func(t *testing.T) []byte {
			raw := marshal(t, clone(f.closedA))
			lines := bytes.SplitN(raw, []byte("\n"), 3)
			// Canonical order ("rUN" sorts before "run"), so only the
			// field-name check can refuse it.
			lines[1] = bytes.Replace(lines[1], []byte(`"run":`), []byte(`"rUN":"other","run":`), 1)
			return bytes.Join(lines, []byte("\n"))
		}, "", verify.ErrMalformedBundle},
		{"header not canonical", func(t *testing.T) []byte {
			raw := marshal(t, clone(f.closedA))
			lines := bytes.SplitN(raw, []byte("\n"), 3)
			lines[1] = bytes.Replace(lines[1], []byte(`{`), []byte(`{ `), 1)
			return bytes.Join(lines, []byte("\n"))
		}, "", verify.ErrMalformedBundle},
		{"policy missing", func(t *testing.T) []byte {
			l := newTestLog(t, origin, f.key)
			l.add("run-p", verify.TypeCallDecided, map[string]any{"policy_hash": verify.PolicyHash([]byte("rules: []\n"))})
			return marshal(t, l.bundle("run-p", false, l.checkpoint(f.w1.signer, f.w2.signer)))
		}, "", verify.ErrPolicy},
		{"policy present", func(t *testing.T) []byte {
			l := newTestLog(t, origin, f.key)
			pol := []byte("rules: []\n")
			l.add("run-p", verify.TypeCallDecided, map[string]any{"policy_hash": verify.PolicyHash(pol)})
			b := l.bundle("run-p", false, l.checkpoint(f.w1.signer, f.w2.signer))
			b.Header.Policies = []verify.PolicySnapshot{{Hash: verify.PolicyHash(pol), Snapshot: pol}}
			return marshal(t, b)
		}, "VERIFIED TO HEAD 0 (open)", nil},
		{"record after run.closing", func(t *testing.T) []byte {
			l := newTestLog(t, origin, f.key)
			l.add("run-c", verify.TypeRunRegistered, nil)
			l.add("run-c", verify.TypeRunClosing, map[string]any{"reason": "closed"})
			l.add("run-c", verify.TypeCallDecided, nil)
			return marshal(t, l.bundle("run-c", false, l.checkpoint(f.w1.signer, f.w2.signer)))
		}, "", verify.ErrAfterClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := verify.Verify(tt.bundle(t), f.trust)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify() = %v, %v; want %v", res, err, tt.wantErr)
				}
				var ve *verify.VerificationError
				if !errors.As(err, &ve) || !errors.Is(err, verify.ErrRefused) {
					t.Errorf("Verify() error %T %v is not a *VerificationError wrapping ErrRefused", err, err)
				}
				if verify.ExitCode(err) != verify.ExitRefused {
					t.Errorf("ExitCode(%v) = %d, want %d", err, verify.ExitCode(err), verify.ExitRefused)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Verify() error = %v, want %q", err, tt.want)
			}
			if got := res.String(); got != tt.want {
				t.Errorf("Verify() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVerifyInvalidTrust(t *testing.T) {
	f := newFixture(t)
	tr := f.trust
	tr.WitnessQuorum = 3
	_, err := verify.Verify(marshal(t, f.closedA), tr)
	if !errors.Is(err, verify.ErrInvalidTrust) || verify.ExitCode(err) != verify.ExitInvalidTrust {
		t.Fatalf("Verify() with quorum > witnesses = %v, want ErrInvalidTrust", err)
	}
}

func TestKeyRetirement(t *testing.T) {
	k1, k2 := newKey(t, origin), newKey(t, origin)
	w := newWitness(t, "w.example")
	trust := newTrust(t, origin, 1, []witness{w}, k1, k2)
	l := newTestLog(t, origin, k1)
	l.add("run-r", verify.TypeRunRegistered, nil)
	l.add("run-r", verify.TypeCallDecided, nil)
	id1, _ := verify.NewTrustKey(k1.vkey)
	// Rotate: k2 signs a retirement of k1 from the next index on.
	l.signer = k2.signer
	l.add(verify.LogRun, verify.TypeKeyRetired, map[string]any{"key_id": id1.KeyID, "retired_from_index": l.Size() + 1})

	t.Run("records before retirement verify", func(t *testing.T) {
		l.add("run-r", verify.TypeCallCompleted, nil) // signed by k2
		res, err := verify.Verify(marshal(t, l.bundle("run-r", false, l.checkpoint(w.signer))), trust)
		if err != nil || res.String() != "VERIFIED TO HEAD 2 (open)" {
			t.Fatalf("Verify() = %v, %v; want VERIFIED TO HEAD 2 (open)", res, err)
		}
	})
	t.Run("retired key after retirement", func(t *testing.T) {
		l.addWith(k1.signer, "run-r", verify.TypeCallDecided, nil)
		_, err := verify.Verify(marshal(t, l.bundle("run-r", false, l.checkpoint(w.signer))), trust)
		if !errors.Is(err, verify.ErrRetiredKey) {
			t.Fatalf("Verify() = %v, want ErrRetiredKey", err)
		}
	})
	t.Run("checkpoint signed only by retired key", func(t *testing.T) {
		b := l.bundle("run-r", false, l.checkpointAt(l.Size(), origin, k1.signer, w.signer))
		_, err := verify.Verify(marshal(t, b), trust)
		if !errors.Is(err, verify.ErrRetiredKey) {
			t.Fatalf("Verify() = %v, want ErrRetiredKey", err)
		}
	})
	t.Run("retirement from trust.json alone", func(t *testing.T) {
		l := newTestLog(t, origin, k1)
		l.add("run-s", verify.TypeRunRegistered, nil)
		l.add("run-s", verify.TypeCallDecided, nil)
		tr := trust
		tr.Log.Keys = slices.Clone(tr.Log.Keys)
		from := int64(1)
		tr.Log.Keys[0].RetiredFromIndex = &from
		b := l.bundle("run-s", false, l.checkpointAt(l.Size(), origin, k2.signer, w.signer))
		if _, err := verify.Verify(marshal(t, b), tr); !errors.Is(err, verify.ErrRetiredKey) {
			t.Fatalf("Verify() = %v, want ErrRetiredKey", err)
		}
		b.Records = b.Records[:1]
		if _, err := verify.Verify(marshal(t, b), tr); err != nil {
			t.Fatalf("Verify() of record before retirement = %v", err)
		}
	})
}

func TestSignedMessage(t *testing.T) {
	k := newKey(t, origin)
	r := &verify.Record{Log: origin, Index: 7, Run: "run-1", RunSeq: 1, Prev: strings.Repeat("0", 64),
		Type: verify.TypeCallDecided, Time: newTestLog(t, origin, k).now, Body: map[string]any{"a": "b"}}
	if _, err := verify.SignRecord(r, k.signer); err != nil {
		t.Fatal(err)
	}
	msg, err := verify.SignedMessage(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "custody-record-v1\x00" + origin + "\x007\x00run-1\x001\x00" + strings.Repeat("0", 64) + "\x00" +
		`{"body":{"a":"b"},"index":7,"key_id":"` + r.KeyID + `","log":"` + origin + `","prev":"` + strings.Repeat("0", 64) +
		`","run":"run-1","run_seq":1,"time":"2026-11-25T10:00:00.000Z","type":"call.decided","v":1}`
	if string(msg) != want {
		t.Errorf("SignedMessage() = %q, want %q", msg, want)
	}
	raw, _ := verify.CanonicalRecord(r)
	back, err := verify.ParseRecord(raw)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := verify.NewTrustKey(k.vkey)
	if back.KeyID != tk.KeyID {
		t.Errorf("KeyID = %s, want %s", back.KeyID, tk.KeyID)
	}
	var v note.Verifier
	if v, err = note.NewVerifier(k.vkey); err != nil || !v.Verify(msg, back.Sig) {
		t.Errorf("record signature does not verify with the note verifier: %v", err)
	}
}

func TestArgsCommitment(t *testing.T) {
	salt := bytes.Repeat([]byte{7}, verify.ArgsSaltSize)
	args, _ := verify.CanonicalizeJSON([]byte(`{"url":"http://169.254.169.254/","method":"GET"}`))
	c, err := verify.CommitArgs(salt, args)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		salt    []byte
		args    string
		wantErr error
	}{
		{"same args reordered", salt, `{ "method":"GET", "url":"http://169.254.169.254/" }`, nil},
		{"other args", salt, `{"method":"POST","url":"http://169.254.169.254/"}`, verify.ErrArgsMismatch},
		{"other salt", bytes.Repeat([]byte{8}, 32), `{"method":"GET","url":"http://169.254.169.254/"}`, verify.ErrArgsMismatch},
		{"short salt", salt[:5], `{"method":"GET","url":"http://169.254.169.254/"}`, verify.ErrArgsMismatch},
		{"duplicate key", salt, `{"method":"GET","method":"GET","url":"x"}`, verify.ErrDuplicateKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verify.VerifyArgsReveal(c, tt.salt, []byte(tt.args))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("VerifyArgsReveal() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestArgsCommitmentNumbers pins commitments (computed outside Go, from
// the canonical bytes): integer-only arguments commit as they did before
// numbers other than integers were accepted, and the float call of issue 8
// commits to its RFC 8785 form however its numbers are spelled.
func TestArgsCommitmentNumbers(t *testing.T) {
	salt := bytes.Repeat([]byte{7}, verify.ArgsSaltSize)
	tests := []struct {
		args, canonical, commitment string
	}{
		{`{"n":9007199254740991,"ids":[0,1,42],"count":-9007199254740991}`,
			`{"count":-9007199254740991,"ids":[0,1,42],"n":9007199254740991}`,
			"7c03930b5c6dd52cfe4dff49516b407bb96356083d8ec96a6cb013cf0d6cce53"},
		{`{"b":1,"a":[1.0,"é",1e21]}`, `{"a":[1,"é",1e+21],"b":1}`,
			"b0fcafc18c586ed0da95c10a23983d4b92a96cff57917da29dd41cdaaf7d5ccb"},
		{`{"b":1e0,"a":[10e-1,"\u00e9",1E+21]}`, `{"a":[1,"é",1e+21],"b":1}`,
			"b0fcafc18c586ed0da95c10a23983d4b92a96cff57917da29dd41cdaaf7d5ccb"},
	}
	for _, tt := range tests {
		c, err := verify.CanonicalizeJSON([]byte(tt.args))
		if err != nil || string(c) != tt.canonical {
			t.Errorf("CanonicalizeJSON(%s) = %s, %v; want %s", tt.args, c, err, tt.canonical)
			continue
		}
		if got, _ := verify.CommitArgs(salt, c); got != tt.commitment {
			t.Errorf("CommitArgs(%s) = %s, want %s", tt.canonical, got, tt.commitment)
		}
		if err := verify.VerifyArgsReveal(tt.commitment, salt, []byte(tt.args)); err != nil {
			t.Errorf("VerifyArgsReveal(%s) = %v", tt.args, err)
		}
	}
	// Numbers a double cannot hold as written would make two argument
	// texts share one commitment: refused.
	for _, args := range []string{`{"id":9007199254740993}`, `{"x":1e400}`, `{"x":-0}`} {
		if _, err := verify.CanonicalizeJSON([]byte(args)); !errors.Is(err, verify.ErrNumber) {
			t.Errorf("CanonicalizeJSON(%s) = %v, want ErrNumber", args, err)
		}
	}
}

// TestVerifyFloatBodies: records whose bodies hold numbers other than
// integers verify, on the verifier's fast record path (a body it only
// validates) and its full parse (a body whose text holds `policy_hash"`).
func TestVerifyFloatBodies(t *testing.T) {
	key := newKey(t, origin)
	w := newWitness(t, "w1.example")
	trust := newTrust(t, origin, 1, []witness{w}, key)
	l := newTestLog(t, origin, key)
	l.add("run-f", verify.TypeRunRegistered, nil)
	l.add("run-f", verify.TypeModelEvent, map[string]any{"cost": 0.0125, "big": 1e21, "tiny": -5e-324})
	l.add("run-f", verify.TypeCallDecided, map[string]any{"prior_policy_hash": "x", "limits": []any{1.5, int64(2), 1e-7}})
	l.add("run-f", verify.TypeRunClosing, map[string]any{"reason": "closed"})
	b := l.bundle("run-f", true, l.checkpoint(w.signer))
	res, err := verify.Verify(marshal(t, b), trust)
	if err != nil || res.String() != "VERIFIED" {
		t.Fatalf("Verify = %v, %v; want VERIFIED", res, err)
	}
	if !bytes.Contains(b.Records[1].Record, []byte(`"big":1e+21`)) || !bytes.Contains(b.Records[1].Record, []byte(`"tiny":-5e-324`)) {
		t.Errorf("record not in RFC 8785 number form: %s", b.Records[1].Record)
	}
}

func TestParseTrust(t *testing.T) {
	f := newFixture(t)
	good, err := f.trust.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"good", string(good), true},
		{"duplicate key", strings.Replace(string(good), `"version": 1`, `"version": 1, "version": 1`, 1), false},
		{"unknown field", strings.Replace(string(good), `"version": 1`, `"version": 1, "extra": 1`, 1), false},
		{"wrong version", strings.Replace(string(good), `"version": 1`, `"version": 2`, 1), false},
		{"quorum too high", strings.Replace(string(good), `"witness_quorum": 2`, `"witness_quorum": 3`, 1), false},
		{"key id mismatch", strings.Replace(string(good), f.trust.Log.Keys[0].KeyID, "00000000", 1), false},
		{"not json", "{", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify.ParseTrust([]byte(tt.in))
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, verify.ErrInvalidTrust)) {
				t.Errorf("ParseTrust() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	text := "example.com/log\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\next one\n"
	c, err := verify.ParseCheckpoint([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if c.Origin != "example.com/log" || c.TreeSize != 20852163 || len(c.Extensions) != 1 {
		t.Errorf("ParseCheckpoint() = %+v", c)
	}
	out, _ := verify.FormatCheckpoint(c)
	if string(out) != text {
		t.Errorf("FormatCheckpoint() = %q, want %q", out, text)
	}
	for _, bad := range []string{"", "a\n1\n", "a\n01\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "a\n-1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "a\n1\nCsUY\n", "a\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"} {
		if _, err := verify.ParseCheckpoint([]byte(bad)); !errors.Is(err, verify.ErrMalformedCheckpoint) {
			t.Errorf("ParseCheckpoint(%q) = %v, want ErrMalformedCheckpoint", bad, err)
		}
	}
}
