package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
)

// TestVerifyReportsOnce: a refused bundle is reported once, as "FAILED:
// ..." on stdout with exit 1, not again on stderr; a missing bundle is
// exit 4 on stderr.
func TestVerifyReportsOnce(t *testing.T) {
	dir := t.TempDir()
	_, vkey, err := note.GenerateKey(rand.Reader, "custody.local/log")
	must(t, err)
	k, err := verify.NewTrustKey(vkey)
	must(t, err)
	tj, err := verify.Trust{Version: verify.TrustVersion, Log: verify.TrustLog{Origin: "custody.local/log", Keys: []verify.TrustKey{k}}}.Marshal()
	must(t, err)
	trust := filepath.Join(dir, "trust.json")
	must(t, os.WriteFile(trust, tj, 0o600))
	bundle := filepath.Join(dir, "run.bundle")
	must(t, os.WriteFile(bundle, []byte("not a bundle\n"), 0o600))

	code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "verify", bundle, "--trust", trust)
	if code != 1 || !strings.HasPrefix(out, "FAILED: ") || errs != "" {
		t.Fatalf("verify garbage = %d, stdout %q, stderr %q; want 1, FAILED on stdout only", code, out, errs)
	}
	code, out, errs = runCLI(t, context.Background(), envMap(nil), "", "verify", filepath.Join(dir, "missing"), "--trust", trust)
	if code != 4 || out != "" || !strings.Contains(errs, "read bundle") {
		t.Fatalf("verify missing = %d, stdout %q, stderr %q; want 4 on stderr", code, out, errs)
	}
}

// badSigner signs like its note.Signer, then flips a bit of the signature:
// a line under the signer's name and key hash that does not verify.
type badSigner struct{ note.Signer }

func (b badSigner) Sign(msg []byte) ([]byte, error) {
	sig, err := b.Signer.Sign(msg)
	if err == nil {
		sig[len(sig)-1] ^= 1
	}
	return sig, err
}

// oneRecordBundle writes dir/name: a bundle of a one-record run signed by
// rec, whose checkpoint (tree size 1) is signed by cpSigners.
func oneRecordBundle(t *testing.T, dir, name string, rec note.Signer, cpSigners ...note.Signer) string {
	t.Helper()
	r := &verify.Record{Log: "custody.local/log", Index: 0, Run: "run-1", RunSeq: 0, Type: verify.TypeRunRegistered,
		Time: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), Body: map[string]any{}}
	raw, err := verify.SignRecord(r, rec)
	must(t, err)
	text, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: "custody.local/log", TreeSize: 1, Root: verify.LeafHash(raw)})
	must(t, err)
	cp, err := note.Sign(&note.Note{Text: string(text)}, cpSigners...)
	must(t, err)
	b, err := (&verify.Bundle{Header: verify.BundleHeader{Run: "run-1"}, Checkpoint: cp, Records: []verify.BundleRecord{{Record: raw}}}).Marshal()
	must(t, err)
	path := filepath.Join(dir, name)
	must(t, os.WriteFile(path, b, 0o600))
	return path
}

// TestVerifyNamesEvidence: custody verify says which retired key alone
// signed a checkpoint, and that a pinned witness's cosignature is invalid
// (not that the checkpoint lacks a trusted log key signature).
func TestVerifyNamesEvidence(t *testing.T) {
	dir := t.TempDir()
	newLogKey := func() (note.Signer, verify.TrustKey) {
		skey, vkey, err := note.GenerateKey(rand.Reader, "custody.local/log")
		must(t, err)
		s, err := note.NewSigner(skey)
		must(t, err)
		k, err := verify.NewTrustKey(vkey)
		must(t, err)
		return s, k
	}
	newWitness := func(name string) (note.Signer, verify.TrustedWitness) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		c, err := verify.NewCosigner(name, priv, nil)
		must(t, err)
		vkey, err := verify.NewCosignatureVerifierKey(name, pub)
		must(t, err)
		return c, verify.TrustedWitness{Name: name, VKey: vkey}
	}
	old, oldKey := newLogKey()
	cur, curKey := newLogKey()
	w1, tw1 := newWitness("w1.example")
	w2, tw2 := newWitness("w2.example")
	from := int64(0)
	oldKey.RetiredFromIndex = &from
	tj, err := verify.Trust{Version: verify.TrustVersion, Log: verify.TrustLog{Origin: "custody.local/log", Keys: []verify.TrustKey{oldKey, curKey}},
		Witnesses: []verify.TrustedWitness{tw1, tw2}, WitnessQuorum: 2}.Marshal()
	must(t, err)
	trust := filepath.Join(dir, "trust.json")
	must(t, os.WriteFile(trust, tj, 0o600))

	tests := []struct {
		name   string
		bundle string
		want   []string // in the FAILED line
	}{
		{"checkpoint signed only by a retired key", oneRecordBundle(t, dir, "retired.bundle", cur, old, w1, w2),
			[]string{"signed only by retired keys", "key " + oldKey.KeyID + " (custody.local/log+" + oldKey.KeyID + ") retired from index 0"}},
		{"bad cosignature from a pinned witness", oneRecordBundle(t, dir, "badcosig.bundle", cur, cur, badSigner{w1}, w2),
			[]string{"too few witness cosignatures", "[w2.example]", "invalid cosignature from trusted witness w1.example+"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "verify", tt.bundle, "--trust", trust)
			if code != 1 || !strings.HasPrefix(out, "FAILED: ") || errs != "" {
				t.Fatalf("verify = %d, stdout %q, stderr %q; want 1, FAILED on stdout", code, out, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("verify output %q does not contain %q", out, w)
				}
			}
			if strings.Contains(out, "not signed by a trusted log key") {
				t.Errorf("verify output %q blames the log key", out)
			}
		})
	}
	// With w1's cosignature valid the same checkpoint verifies.
	good := oneRecordBundle(t, dir, "good.bundle", cur, cur, w1, w2)
	if code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "verify", good, "--trust", trust); code != 0 || out != "VERIFIED TO HEAD 0 (open)\n" {
		t.Fatalf("verify good = %d, %q, %q; want VERIFIED TO HEAD 0 (open)", code, out, errs)
	}
}
