package signer_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/verify"
)

// rotate rotates the signing key over the admin API.
func (e *env) rotate() string {
	e.t.Helper()
	var out map[string]string
	if st := e.call(e.admin, "", "POST", "/v1/signer/keys/rotate", nil, &out); st != 200 || out["key_id"] == "" {
		e.t.Fatalf("POST /v1/signer/keys/rotate = %d %v", st, out)
	}
	return out["key_id"]
}

func recordKeyIDs(t *testing.T, b *verify.Bundle) []string {
	t.Helper()
	var ids []string
	for _, r := range b.Records {
		rec, err := verify.ParseRecord(r.Record)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.KeyID)
	}
	return ids
}

func mustVerify(t *testing.T, data []byte, trust verify.Trust, want string) {
	t.Helper()
	res, err := verify.Verify(data, trust)
	if err != nil || res.String() != want {
		t.Fatalf("Verify() = %v, %v; want %s", res, err, want)
	}
}

// TestKeyRotation: records before and after a rotation verify with the new
// trust.json, across a restart; the pre-rotation trust.json refuses the
// new key; a record forged with the retired key is refused.
func TestKeyRotation(t *testing.T) {
	w := newFakeWitness(t, "w1.example")
	e := newEnv(t, func(o *signer.Options) {
		o.Witnesses = []signer.Witness{w}
		o.TrustedWitnesses = []verify.TrustedWitness{{Name: "w1.example", VKey: w.vkey}}
		o.WitnessQuorum = 1
	})
	trust0 := e.s.Trust()
	if len(trust0.Log.Keys) != 1 {
		t.Fatalf("Trust() before rotation has %d keys, want 1", len(trust0.Log.Keys))
	}
	oldID := trust0.Log.Keys[0].KeyID

	run := e.register(agentTok)
	e.decide(agentTok, run, "c1", "Bash", `{}`)
	newID := e.rotate()
	if newID == oldID {
		t.Fatalf("rotated key id = old key id %s", oldID)
	}
	if fi, err := os.Stat(e.opts.KeyFile + "." + newID); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new key file: %v, %v; want mode 0600", fi, err)
	}
	if _, err := os.Stat(e.opts.KeyFile); err != nil {
		t.Fatalf("old key file: %v", err)
	}
	if !strings.Contains(e.s.VerifierKey(), "+"+newID+"+") {
		t.Fatalf("VerifierKey() = %s, want key %s", e.s.VerifierKey(), newID)
	}
	e.decide(agentTok, run, "c2", "Bash", `{}`)

	// The key.retired record: in "_log", signed by the new key, retiring
	// the old one from the next index.
	var kr *verify.Record
	for _, r := range e.logRecords() {
		if r.Type == verify.TypeKeyRetired {
			kr = r
		}
	}
	if kr == nil || kr.KeyID != newID || kr.Body["key_id"] != oldID || kr.Body["retired_from_index"] != kr.Index+1 {
		t.Fatalf("key.retired record = %+v, want signed by %s retiring %s from its index + 1", kr, newID, oldID)
	}

	// Trust lists both keys, the old one retired.
	tr := e.s.Trust()
	if len(tr.Log.Keys) != 2 || tr.Log.Keys[0].KeyID != oldID || tr.Log.Keys[0].RetiredFromIndex == nil ||
		*tr.Log.Keys[0].RetiredFromIndex != kr.Index+1 || tr.Log.Keys[1].KeyID != newID || tr.Log.Keys[1].RetiredFromIndex != nil {
		t.Fatalf("Trust().Log.Keys = %+v", tr.Log.Keys)
	}

	// The bundle spans the rotation and verifies (e.verify uses Trust()).
	res, b := e.verify(run)
	if res.String() != "VERIFIED TO HEAD 2 (open)" {
		t.Fatalf("Verify = %v, want VERIFIED TO HEAD 2 (open)", res)
	}
	if ids := recordKeyIDs(t, b); !slices.Equal(ids, []string{oldID, oldID, newID}) {
		t.Fatalf("record key ids = %v, want [%s %s %s]", ids, oldID, oldID, newID)
	}
	if len(b.KeyRecords) != 1 || len(b.Header.Keys) != 2 {
		t.Fatalf("bundle has %d key records and %d keys, want 1 and 2", len(b.KeyRecords), len(b.Header.Keys))
	}
	data := e.bundle(run)

	// Without retired_from_index in trust.json, the K line alone retires
	// the old key: the bundle still verifies.
	trK := tr
	trK.Log.Keys = slices.Clone(tr.Log.Keys)
	trK.Log.Keys[0].RetiredFromIndex = nil
	mustVerify(t, data, trK, "VERIFIED TO HEAD 2 (open)")

	// trust.json from before the rotation knows only the old key: the
	// checkpoint (and the records after the rotation) are signed by the
	// new key, so the bundle is refused.
	if _, err := verify.Verify(data, trust0); !errors.Is(err, verify.ErrCheckpointSignature) {
		t.Fatalf("Verify with pre-rotation trust = %v, want ErrCheckpointSignature", err)
	}

	// A record forged with the old key after its retirement is refused,
	// whether the retirement comes from trust.json or the K line alone.
	raw, err := os.ReadFile(e.opts.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	oldSigner, err := note.NewSigner(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	last, err := verify.ParseRecord(b.Records[2].Record)
	if err != nil {
		t.Fatal(err)
	}
	forged := *last
	forged.Body = map[string]any{"call_id": "c2", "tool": "Bash", "effect": "allow"}
	forgedRaw, err := verify.SignRecord(&forged, oldSigner)
	if err != nil {
		t.Fatal(err)
	}
	for name, trust := range map[string]verify.Trust{"trust.json": tr, "K line": trK} {
		fb, _ := verify.ParseBundle(data)
		fb.Records[2].Record = forgedRaw
		fdata, err := fb.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := verify.Verify(fdata, trust); !errors.Is(err, verify.ErrRetiredKey) {
			t.Fatalf("%s: Verify(forged record) = %v, want ErrRetiredKey", name, err)
		}
	}
	// Appended after the real records, too.
	fb, _ := verify.ParseBundle(data)
	app := verify.Record{Log: last.Log, Index: last.Index + 1, Run: run, RunSeq: 3, Prev: verify.ChainHash(b.Records[2].Record),
		Type: verify.TypeCallDecided, Time: last.Time, Body: map[string]any{"call_id": "c9"}}
	appRaw, err := verify.SignRecord(&app, oldSigner)
	if err != nil {
		t.Fatal(err)
	}
	fb.Records = append(fb.Records, verify.BundleRecord{Record: appRaw, Proof: b.Records[2].Proof})
	fdata, _ := fb.Marshal()
	if _, err := verify.Verify(fdata, tr); !errors.Is(err, verify.ErrRetiredKey) {
		t.Fatalf("Verify(appended forged record) = %v, want ErrRetiredKey", err)
	}

	// Restart: the new key still signs, the old one is still known.
	e.close()
	e.open()
	if !strings.Contains(e.s.VerifierKey(), "+"+newID+"+") {
		t.Fatalf("VerifierKey() after restart = %s, want key %s", e.s.VerifierKey(), newID)
	}
	if got := e.s.Trust(); !slices.EqualFunc(got.Log.Keys, tr.Log.Keys, func(a, b verify.TrustKey) bool {
		return a.KeyID == b.KeyID && (a.RetiredFromIndex == nil) == (b.RetiredFromIndex == nil)
	}) {
		t.Fatalf("Trust() after restart = %+v, want %+v", got.Log.Keys, tr.Log.Keys)
	}
	e.decide(agentTok, run, "c3", "Bash", `{}`)
	res, b = e.verify(run)
	if res.String() != "VERIFIED TO HEAD 3 (open)" {
		t.Fatalf("Verify after restart = %v", res)
	}
	if ids := recordKeyIDs(t, b); ids[3] != newID {
		t.Fatalf("record after restart signed by %s, want %s", ids[3], newID)
	}

	// A second rotation after the restart, a close and another restart:
	// three keys, two retired, the closed run verifies.
	thirdID := e.rotate()
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil); st != 200 {
		t.Fatalf("close = %d", st)
	}
	e.close()
	e.open()
	tr = e.s.Trust()
	if len(tr.Log.Keys) != 3 || tr.Log.Keys[1].RetiredFromIndex == nil || tr.Log.Keys[2].KeyID != thirdID {
		t.Fatalf("Trust() after second rotation = %+v", tr.Log.Keys)
	}
	res, b = e.verify(run)
	if res.String() != "VERIFIED" || len(b.KeyRecords) != 2 {
		t.Fatalf("Verify after second rotation = %v with %d key records", res, len(b.KeyRecords))
	}
	if ids := recordKeyIDs(t, b); ids[4] != thirdID {
		t.Fatalf("run.closing signed by %s, want %s", ids[4], thirdID)
	}
}

// TestKeyRotationConcurrent rotates while calls race; the run verifies.
func TestKeyRotationConcurrent(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 40; i++ {
			if _, st := e.decide(agentTok, run, "c"+strings.Repeat("x", i+1), "Bash", `{}`); st != 200 {
				t.Errorf("decide = %d", st)
			}
		}
	}()
	for i := 0; i < 3; i++ {
		if _, err := e.s.RotateKey(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.Checkpoint(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if res, _ := e.verify(run); res.String() != "VERIFIED TO HEAD 40 (open)" {
		t.Fatalf("Verify = %v", res)
	}
	if n := len(e.s.Trust().Log.Keys); n != 4 {
		t.Fatalf("Trust() has %d keys, want 4", n)
	}
}
