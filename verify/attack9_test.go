package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
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
