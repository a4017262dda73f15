package verify_test

import (
	"bytes"
	"encoding/base64"
	"errors"
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
		}, nil, verify.ErrWitnessQuorum},
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
