package verify_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agentcustody/custody/verify"
)

// badCosignature flips a bit of the signature in name's cosignature line
// of cp, keeping the name and key hash: a line that parses but does not
// verify.
func badCosignature(t testing.TB, cp []byte, name string) []byte {
	t.Helper()
	var out []byte
	found := false
	for _, line := range bytes.SplitAfter(cp, []byte("\n")) {
		if prefix := []byte("— " + name + " "); bytes.HasPrefix(line, prefix) {
			raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSuffix(line[len(prefix):], []byte("\n"))))
			if err != nil {
				t.Fatal(err)
			}
			raw[len(raw)-1] ^= 1
			line = append(append(prefix, base64.StdEncoding.EncodeToString(raw)...), '\n')
			found = true
		}
		out = append(out, line...)
	}
	if !found {
		t.Fatalf("no cosignature by %s in %q", name, cp)
	}
	return out
}

// TestInvalidCosignatureIgnored: a trusted witness's invalid cosignature
// counts for nothing but does not refuse a checkpoint whose valid
// cosignatures meet the quorum (x/mod note.Open alone would refuse the
// whole note for it).
func TestInvalidCosignatureIgnored(t *testing.T) {
	f := newFixture(t)
	w3 := newWitness(t, "w3.example")
	quorum1 := newTrust(t, origin, 1, []witness{f.w1, f.w2}, f.key)
	quorum2of3 := newTrust(t, origin, 2, []witness{f.w1, f.w2, w3}, f.key)
	tests := []struct {
		name    string
		trust   verify.Trust
		cp      func() []byte
		want    []string // witnesses counted
		wantErr error
	}{
		{"bad w1, good w2, quorum 1", quorum1, func() []byte {
			return badCosignature(t, f.log.checkpoint(f.w1.signer, f.w2.signer), f.w1.name)
		}, []string{f.w2.name}, nil},
		{"good w1, bad w2, quorum 1", quorum1, func() []byte {
			return badCosignature(t, f.log.checkpoint(f.w1.signer, f.w2.signer), f.w2.name)
		}, []string{f.w1.name}, nil},
		{"bad w1 line, then its valid line, quorum 2", f.trust, func() []byte {
			good := f.log.checkpoint(f.w1.signer, f.w2.signer)
			i := bytes.Index(good, []byte("— "+f.w1.name+" "))
			line := good[i : i+bytes.IndexByte(good[i:], '\n')+1]
			return append(badCosignature(t, good, f.w1.name), line...)
		}, []string{f.w1.name, f.w2.name}, nil},
		{"bad w1 among three, quorum 2", quorum2of3, func() []byte {
			return badCosignature(t, f.log.checkpoint(f.w1.signer, f.w2.signer, w3.signer), f.w1.name)
		}, []string{f.w2.name, w3.name}, nil},
		{"bad w1, good w2, quorum 2", f.trust, func() []byte {
			return badCosignature(t, f.log.checkpoint(f.w1.signer, f.w2.signer), f.w1.name)
		}, []string{f.w2.name}, verify.ErrWitnessQuorum},
		{"bad log signature, good witnesses", f.trust, func() []byte {
			return badCosignature(t, f.log.checkpoint(f.w1.signer, f.w2.signer), origin)
		}, nil, verify.ErrCheckpointSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := clone(f.closedA)
			b.Checkpoint = tt.cp()
			res, err := verify.Verify(marshal(t, b), tt.trust)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify() = %+v, %v; want %v", res, err, tt.wantErr)
				}
				t.Logf("refused: %v", err)
				if tt.want == nil {
					return
				}
				// The refusal names the valid and the invalid cosigners.
				var qe *verify.WitnessQuorumError
				if !errors.As(err, &qe) {
					t.Fatalf("Verify() = %v, want a *WitnessQuorumError", err)
				}
				wantBad := []string{fmt.Sprintf("%s+%08x", f.w1.name, f.w1.signer.KeyHash())}
				if qe.Quorum != 2 || !slices.Equal(qe.Valid, tt.want) || !slices.Equal(qe.Invalid, wantBad) {
					t.Errorf("WitnessQuorumError = %+v, want quorum 2, valid %v, invalid %v", qe, tt.want, wantBad)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify() = %v, want VERIFIED", err)
			}
			if tt.want != nil && !slices.Equal(res.Witnesses, tt.want) {
				t.Errorf("Verify().Witnesses = %v, want %v", res.Witnesses, tt.want)
			}
		})
	}
}

// TestRetiredCheckpointKeyNamed: a checkpoint signed only by a retired key
// is refused with a *RetiredKeyError naming that key and its retirement.
func TestRetiredCheckpointKeyNamed(t *testing.T) {
	k1, k2 := newKey(t, origin), newKey(t, origin)
	w := newWitness(t, "w.example")
	trust := newTrust(t, origin, 1, []witness{w}, k1, k2)
	from := int64(1)
	trust.Log.Keys[0].RetiredFromIndex = &from
	l := newTestLog(t, origin, k1)
	l.add("run-s", verify.TypeRunRegistered, nil)
	l.add("run-s", verify.TypeCallDecided, nil)
	_, err := verify.Verify(marshal(t, l.bundle("run-s", false, l.checkpointAt(l.Size(), origin, k1.signer, w.signer))), trust)
	var re *verify.RetiredKeyError
	if !errors.As(err, &re) || !errors.Is(err, verify.ErrRetiredKey) {
		t.Fatalf("Verify() = %v, want a *RetiredKeyError", err)
	}
	id1, _ := verify.NewTrustKey(k1.vkey)
	want := verify.RetiredKey{KeyID: id1.KeyID, Name: origin, RetiredFromIndex: 1}
	if re.TreeSize != 2 || len(re.Keys) != 1 || re.Keys[0] != want {
		t.Errorf("RetiredKeyError = %+v, want size 2, keys [%+v]", re, want)
	}
	t.Logf("refused: %v", err)
}

// TestQuorumCountsWitnessesNotKeys: trust.json may list one witness
// under two keys (a rotation); its cosignatures under both count once
// toward witness_quorum, which asks for distinct witnesses — one witness
// alone never meets a quorum of 2.
func TestQuorumCountsWitnessesNotKeys(t *testing.T) {
	f := newFixture(t)
	w1b := newWitness(t, f.w1.name) // w1's second key
	trust := newTrust(t, origin, 2, []witness{f.w1, w1b, f.w2}, f.key)
	b := clone(f.closedA)
	b.Checkpoint = f.log.checkpoint(f.w1.signer, w1b.signer)
	res, err := verify.Verify(marshal(t, b), trust)
	var qe *verify.WitnessQuorumError
	if !errors.As(err, &qe) || !slices.Equal(qe.Valid, []string{f.w1.name}) {
		t.Fatalf("Verify() = %+v, %v; want a WitnessQuorumError with valid [%s]", res, err, f.w1.name)
	}
	// With w2 the quorum is met, w1 named once.
	b.Checkpoint = f.log.checkpoint(f.w1.signer, w1b.signer, f.w2.signer)
	res, err = verify.Verify(marshal(t, b), trust)
	if err != nil || !slices.Equal(res.Witnesses, []string{f.w1.name, f.w2.name}) {
		t.Fatalf("Verify() = %v, %v; want VERIFIED by %s and %s", res.Witnesses, err, f.w1.name, f.w2.name)
	}
	// A quorum larger than the distinct witnesses can never be met.
	tr := trust
	tr.WitnessQuorum = 3
	if _, err := tr.Marshal(); !errors.Is(err, verify.ErrInvalidTrust) {
		t.Errorf("Trust{quorum 3 of 2 distinct witnesses}.Marshal() = %v, want ErrInvalidTrust", err)
	}
}
