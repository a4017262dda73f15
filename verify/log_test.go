package verify_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLog is an in-memory signer log: the writer side of the formats, as the
// signer server implements it.
type testLog struct {
	tb      testing.TB
	origin  string
	signer  note.Signer // current log key
	hashes  []tlog.Hash // tlog stored hashes
	leaves  [][]byte
	runs    map[string]*runState
	keyRecs []int64 // indexes of key.retired records
	now     time.Time
}

type runState struct {
	seq     int64
	prev    string
	indexes []int64
}

type logKey struct {
	skey, vkey string
	signer     note.Signer
}

func newKey(tb testing.TB, name string) logKey {
	tb.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	return logKey{skey, vkey, s}
}

func newTestLog(tb testing.TB, origin string, key logKey) *testLog {
	return &testLog{
		tb: tb, origin: origin, signer: key.signer,
		runs: map[string]*runState{},
		now:  time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC),
	}
}

func (l *testLog) Size() int64 { return int64(len(l.leaves)) }

func (l *testLog) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = l.hashes[x]
		}
		return out, nil
	})
}

// appendLeaf adds raw as the next leaf.
func (l *testLog) appendLeaf(raw []byte) {
	hs, err := tlog.StoredHashes(l.Size(), raw, l.reader())
	if err != nil {
		l.tb.Fatal(err)
	}
	l.hashes = append(l.hashes, hs...)
	l.leaves = append(l.leaves, raw)
}

// add appends a record of run with the current key and returns its index.
func (l *testLog) add(run, typ string, body map[string]any) int64 {
	return l.addWith(l.signer, run, typ, body)
}

func (l *testLog) addWith(s note.Signer, run, typ string, body map[string]any) int64 {
	l.tb.Helper()
	st := l.runs[run]
	if st == nil {
		st = &runState{}
		l.runs[run] = st
	}
	l.now = l.now.Add(1500 * time.Millisecond)
	r := &verify.Record{
		Log: l.origin, Index: l.Size(), Run: run, RunSeq: st.seq, Prev: st.prev,
		Type: typ, Time: l.now, Body: body,
	}
	raw, err := verify.SignRecord(r, s)
	if err != nil {
		l.tb.Fatal(err)
	}
	l.appendLeaf(raw)
	st.seq++
	st.prev = verify.ChainHash(raw)
	st.indexes = append(st.indexes, r.Index)
	if typ == verify.TypeKeyRetired {
		l.keyRecs = append(l.keyRecs, r.Index)
	}
	return r.Index
}

// checkpoint returns the checkpoint of the current tree signed by the log key
// and cosigned by cosigners.
func (l *testLog) checkpoint(cosigners ...note.Signer) []byte {
	return l.checkpointAt(l.Size(), l.origin, append([]note.Signer{l.signer}, cosigners...)...)
}

func (l *testLog) checkpointAt(size int64, origin string, signers ...note.Signer) []byte {
	l.tb.Helper()
	root, err := tlog.TreeHash(size, l.reader())
	if err != nil {
		l.tb.Fatal(err)
	}
	text, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: origin, TreeSize: size, Root: root})
	if err != nil {
		l.tb.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: string(text)}, signers...)
	if err != nil {
		l.tb.Fatal(err)
	}
	return msg
}

func (l *testLog) proof(index, size int64) tlog.RecordProof {
	l.tb.Helper()
	p, err := tlog.ProveRecord(size, index, l.reader())
	if err != nil {
		l.tb.Fatal(err)
	}
	return p
}

// bundle exports run against a checkpoint (of the current tree).
func (l *testLog) bundle(run string, closed bool, checkpoint []byte) *verify.Bundle {
	size := l.Size()
	b := &verify.Bundle{
		Header:     verify.BundleHeader{Run: run, Closed: closed},
		Checkpoint: checkpoint,
	}
	for _, i := range l.runs[run].indexes {
		b.Records = append(b.Records, verify.BundleRecord{Record: l.leaves[i], Proof: l.proof(i, size)})
	}
	for _, i := range l.keyRecs {
		b.KeyRecords = append(b.KeyRecords, verify.BundleRecord{Record: l.leaves[i], Proof: l.proof(i, size)})
	}
	return b
}

type witness struct {
	name   string
	vkey   string
	signer note.Signer
}

func newWitness(tb testing.TB, name string) witness {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := verify.NewCosigner(name, priv, func() time.Time { return time.Unix(1764064800, 0) })
	if err != nil {
		tb.Fatal(err)
	}
	vkey, err := verify.NewCosignatureVerifierKey(name, pub)
	if err != nil {
		tb.Fatal(err)
	}
	return witness{name, vkey, c}
}

func newTrust(tb testing.TB, origin string, quorum int, ws []witness, keys ...logKey) verify.Trust {
	tb.Helper()
	t := verify.Trust{Version: verify.TrustVersion, Log: verify.TrustLog{Origin: origin}, WitnessQuorum: quorum}
	for _, k := range keys {
		tk, err := verify.NewTrustKey(k.vkey)
		if err != nil {
			tb.Fatal(err)
		}
		t.Log.Keys = append(t.Log.Keys, tk)
	}
	for _, w := range ws {
		t.Witnesses = append(t.Witnesses, verify.TrustedWitness{Name: w.name, VKey: w.vkey})
	}
	// Round-trip through trust.json, as the CLI does.
	b, err := t.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	t2, err := verify.ParseTrust(b)
	if err != nil {
		tb.Fatal(err)
	}
	return t2
}

func marshal(tb testing.TB, b *verify.Bundle) []byte {
	tb.Helper()
	out, err := b.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
