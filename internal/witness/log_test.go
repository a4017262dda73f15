package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/internal/witness"
	"github.com/agentcustody/custody/verify"
)

const (
	origin      = "signer.custody.example/log"
	witnessName = "w1.example"
)

// testLog is a log of signed records, all of run "run-a", whose checkpoints
// the tests submit.
type testLog struct {
	tb     testing.TB
	origin string
	skey   string
	vkey   string
	signer note.Signer
	hashes []tlog.Hash
	leaves [][]byte
	prev   string
	now    time.Time
}

func newTestLog(tb testing.TB, origin string, records int) *testLog {
	tb.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	l := &testLog{tb: tb, origin: origin, skey: skey, vkey: vkey, signer: s, now: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	l.grow(records)
	return l
}

// fork returns a log with the same key and the first n records of l, then
// different records up to l's size.
func (l *testLog) fork(n int64) *testLog {
	f := &testLog{tb: l.tb, origin: l.origin, skey: l.skey, vkey: l.vkey, signer: l.signer, now: l.now.Add(time.Hour)}
	f.hashes = append(f.hashes, l.hashes[:tlog.StoredHashCount(n)]...)
	f.leaves = append(f.leaves, l.leaves[:n]...)
	f.prev = verify.ChainHash(l.leaves[n-1])
	f.grow(len(l.leaves) - int(n))
	return f
}

func (l *testLog) size() int64 { return int64(len(l.leaves)) }

func (l *testLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.hashes[x]
	}
	return out, nil
}

func (l *testLog) grow(n int) {
	l.tb.Helper()
	for range n {
		l.now = l.now.Add(1500 * time.Millisecond)
		r := &verify.Record{
			Log: l.origin, Index: l.size(), Run: "run-a", RunSeq: l.size(), Prev: l.prev,
			Type: verify.TypeModelEvent, Time: l.now, Body: map[string]any{"n": l.size()},
		}
		raw, err := verify.SignRecord(r, l.signer)
		if err != nil {
			l.tb.Fatal(err)
		}
		hs, err := tlog.StoredHashes(l.size(), raw, l)
		if err != nil {
			l.tb.Fatal(err)
		}
		l.hashes = append(l.hashes, hs...)
		l.leaves = append(l.leaves, raw)
		l.prev = verify.ChainHash(raw)
	}
}

func (l *testLog) root(n int64) tlog.Hash {
	l.tb.Helper()
	if n == 0 {
		return verify.EmptyTreeHash()
	}
	h, err := tlog.TreeHash(n, l)
	if err != nil {
		l.tb.Fatal(err)
	}
	return h
}

// checkpoint returns the checkpoint of size n signed by signers (the log's
// key if none).
func (l *testLog) checkpoint(n int64, signers ...note.Signer) []byte {
	l.tb.Helper()
	if len(signers) == 0 {
		signers = []note.Signer{l.signer}
	}
	text, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: l.origin, TreeSize: n, Root: l.root(n)})
	if err != nil {
		l.tb.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: string(text)}, signers...)
	if err != nil {
		l.tb.Fatal(err)
	}
	return msg
}

// proof returns the consistency proof from old to n; nil if old is 0 or n.
func (l *testLog) proof(old, n int64) tlog.TreeProof {
	l.tb.Helper()
	if old == 0 || old == n {
		return nil
	}
	p, err := tlog.ProveTree(n, old, l)
	if err != nil {
		l.tb.Fatal(err)
	}
	return p
}

func (l *testLog) body(old, n int64) []byte {
	l.tb.Helper()
	b, err := witness.AddCheckpointRequest{OldSize: old, Proof: l.proof(old, n), Checkpoint: l.checkpoint(n)}.Marshal()
	if err != nil {
		l.tb.Fatal(err)
	}
	return b
}

// verifyCosigned checks, with the public verifier and a trust.json that
// requires one cosignature by vkey, a bundle of the first n records against
// the checkpoint with the cosignature lines appended.
func (l *testLog) verifyCosigned(n int64, checkpoint, cosigs []byte, vkey string) error {
	l.tb.Helper()
	tk, err := verify.NewTrustKey(l.vkey)
	if err != nil {
		l.tb.Fatal(err)
	}
	trust := verify.Trust{
		Version:       verify.TrustVersion,
		Log:           verify.TrustLog{Origin: l.origin, Keys: []verify.TrustKey{tk}},
		Witnesses:     []verify.TrustedWitness{{Name: witnessName, VKey: vkey}},
		WitnessQuorum: 1,
	}
	b := &verify.Bundle{Header: verify.BundleHeader{V: verify.BundleVersion, Run: "run-a"}, Checkpoint: append(bytes.Clone(checkpoint), cosigs...)}
	for i := range n {
		p, err := tlog.ProveRecord(n, i, l)
		if err != nil {
			l.tb.Fatal(err)
		}
		b.Records = append(b.Records, verify.BundleRecord{Record: l.leaves[i], Proof: p})
	}
	data, err := b.Marshal()
	if err != nil {
		l.tb.Fatal(err)
	}
	_, err = verify.Verify(data, trust)
	return err
}

// logRecorder routes slog to t.Logf and counts Error records.
type logRecorder struct {
	tb     testing.TB
	mu     sync.Mutex
	errors atomic.Int64
}

func (r *logRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.Contains(p, []byte("level=ERROR")) {
		r.errors.Add(1)
	}
	r.tb.Logf("%s", bytes.TrimSuffix(p, []byte("\n")))
	return len(p), nil
}

type env struct {
	log     *testLog
	db      *sqlite.DB
	dir     string
	w       *witness.Witness
	srv     *httptest.Server
	client  *witness.Client
	logs    *logRecorder
	witKey  ed25519.PrivateKey
	witVKey string
}

// newEnv starts a witness over a fresh SQLite database, following l.
func newEnv(t *testing.T, l *testLog) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{log: l, db: db, dir: dir, logs: &logRecorder{tb: t}, witKey: key}
	e.start(t)
	return e
}

func (e *env) start(t *testing.T) {
	t.Helper()
	w, err := witness.New(witness.Options{
		Name:  witnessName,
		Key:   e.witKey,
		Logs:  []witness.LogConfig{{Origin: e.log.origin, VerifierKeys: []string{e.log.vkey}}},
		Store: e.db,
		Log:   slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.w, e.witVKey = w, w.VerifierKey()
	e.srv = httptest.NewServer(w.Handler())
	t.Cleanup(e.srv.Close)
	e.client = &witness.Client{URL: e.srv.URL, Name: witnessName, HTTPClient: e.srv.Client()}
}

func (e *env) post(t *testing.T, body []byte) (int, string, string) {
	t.Helper()
	resp, err := e.srv.Client().Post(e.srv.URL+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b.String()
}

// add submits a valid request from old to n and fails the test unless the
// witness cosigns.
func (e *env) add(t *testing.T, old, n int64) []byte {
	t.Helper()
	sigs, err := e.client.AddCheckpoint(context.Background(), old, e.log.proof(old, n), e.log.checkpoint(n))
	if err != nil {
		t.Fatalf("AddCheckpoint(%d -> %d) = %v", old, n, err)
	}
	return sigs
}
