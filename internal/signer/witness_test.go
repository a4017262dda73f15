package signer_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/internal/witness"
	"github.com/agentcustody/custody/verify"
)

// writeLogKey creates the signer's log key at path (as custody keys init
// does) and returns its note verifier key, so that a witness can follow
// the log before the signer starts.
func writeLogKey(t testing.TB, path string) string {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, signer.DefaultOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return vkey
}

// realWitness is an internal/witness witness following the signer's log,
// on SQLite in its own temp dir, served over httptest on loopback. It
// keeps the add-checkpoint requests it was sent; tamper, if set, rewrites
// each 200 answer (a hostile witness).
type realWitness struct {
	name, vkey string
	srv        *httptest.Server
	mu         sync.Mutex
	reqs       []witness.AddCheckpointRequest
	tamper     func([]byte) []byte
}

func newRealWitness(t testing.TB, name, logVKey string) *realWitness {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w, err := witness.New(witness.Options{Name: name, Key: priv, Store: db,
		Logs: []witness.LogConfig{{Origin: signer.DefaultOrigin, VerifierKeys: []string{logVKey}}}})
	if err != nil {
		t.Fatal(err)
	}
	rw := &realWitness{name: name, vkey: w.VerifierKey()}
	h := w.Handler()
	rw.srv = httptest.NewServer(http.HandlerFunc(func(resp http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if req, err := witness.ParseAddCheckpointRequest(body); err == nil {
			rw.mu.Lock()
			rw.reqs = append(rw.reqs, req)
			rw.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		out := rec.Body.Bytes()
		rw.mu.Lock()
		tamper := rw.tamper
		rw.mu.Unlock()
		if rec.Code == http.StatusOK && tamper != nil {
			out = tamper(out)
		}
		for k, v := range rec.Header() {
			resp.Header()[k] = v
		}
		resp.WriteHeader(rec.Code)
		resp.Write(out)
	}))
	t.Cleanup(rw.srv.Close)
	return rw
}

// client is the signer's C2SP tlog-witness client for w.
func (w *realWitness) client() *witness.Client {
	return &witness.Client{URL: w.srv.URL, Name: w.name, HTTPClient: w.srv.Client()}
}

func (w *realWitness) trusted() verify.TrustedWitness {
	return verify.TrustedWitness{Name: w.name, VKey: w.vkey}
}

func (w *realWitness) requests() []witness.AddCheckpointRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]witness.AddCheckpointRequest(nil), w.reqs...)
}

// badSignature flips a bit of the Ed25519 signature in each cosignature
// line, keeping the witness's name and key hash: a syntactically valid
// cosignature that does not verify.
func badSignature(answer []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(answer, []byte("\n")) {
		i := bytes.LastIndexByte(line, ' ')
		raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSuffix(line[i+1:], []byte("\n"))))
		if i < 0 || err != nil || len(raw) < 20 {
			out = append(out, line...)
			continue
		}
		raw[len(raw)-1] ^= 1
		out = append(append(append(out, line[:i+1]...), base64.StdEncoding.EncodeToString(raw)...), '\n')
	}
	return out
}

// TestProbeEmptyTreeHash: the start-up probe of an empty log offers a
// size-0 checkpoint whose root is the RFC 6962 empty-tree hash,
// SHA-256("") = e3b0c442…b855, which a conforming witness cosigns.
func TestProbeEmptyTreeHash(t *testing.T) {
	var w *realWitness
	newEnv(t, func(o *signer.Options) {
		w = newRealWitness(t, "w1.example", writeLogKey(t, o.KeyFile))
		o.Witnesses = []signer.Witness{w.client()}
	})
	reqs := w.requests()
	if len(reqs) != 1 {
		t.Fatalf("witness got %d requests, want the one probe", len(reqs))
	}
	text, _, _ := bytes.Cut(reqs[0].Checkpoint, []byte("\n\n"))
	cp, err := verify.ParseCheckpoint(append(text, '\n'))
	if err != nil {
		t.Fatal(err)
	}
	const want = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got := hex.EncodeToString(cp.Root[:]); cp.TreeSize != 0 || got != want {
		t.Errorf("probe checkpoint = size %d root %s, want size 0 root %s", cp.TreeSize, got, want)
	}
}

// TestBadCosignatureDropped: a witness that answers a cosignature under
// its own name that does not verify (here a real witness behind a proxy
// that flips a signature bit) has it dropped on receipt, logged and
// counted; the checkpoint keeps the honest witness's cosignature, every
// signature on it verifies (x/mod note.Open refuses a note with one bad
// signature by a known key), and the bundle verifies with the quorum the
// honest witness meets.
func TestBadCosignatureDropped(t *testing.T) {
	var hostile, honest *realWitness
	var mu sync.Mutex
	bad := map[int]int{}
	e := newEnv(t, func(o *signer.Options) {
		logVKey := writeLogKey(t, o.KeyFile)
		hostile = newRealWitness(t, "w1.example", logVKey)
		hostile.tamper = badSignature
		honest = newRealWitness(t, "w2.example", logVKey)
		o.Witnesses = []signer.Witness{hostile.client(), honest.client()}
		o.TrustedWitnesses = []verify.TrustedWitness{hostile.trusted(), honest.trusted()}
		o.WitnessQuorum = 1
		o.OnBadCosignature = func(i int) { mu.Lock(); bad[i]++; mu.Unlock() }
	})
	run := e.register(agentTok)
	e.decide(agentTok, run, "c1", "Bash", `{}`)
	res, _ := e.verify(run)
	if !slices.Equal(res.Witnesses, []string{"w2.example"}) {
		t.Errorf("Verify().Witnesses = %v, want [w2.example]", res.Witnesses)
	}
	cp, err := e.db.LatestCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var vs []note.Verifier
	for _, vk := range []string{e.s.VerifierKey(), hostile.vkey, honest.vkey} {
		v, err := verify.NewWitnessVerifier(vk)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	n, err := note.Open(cp.Note, note.VerifierList(vs...))
	if err != nil {
		t.Fatalf("stored checkpoint %q does not verify: %v", cp.Note, err)
	}
	if len(n.Sigs) != 2 || n.Sigs[1].Name != "w2.example" || len(n.UnverifiedSigs) != 0 {
		t.Errorf("stored checkpoint signatures = %+v (unverified %+v), want the log's and w2.example's", n.Sigs, n.UnverifiedSigs)
	}
	mu.Lock()
	defer mu.Unlock()
	if bad[0] == 0 || bad[1] != 0 {
		t.Errorf("OnBadCosignature calls by witness = %v, want some for 0 (hostile), none for 1", bad)
	}
}

// TestForkAnswerHaltsWrites: the log is restored from an empty backup and
// regrows, without its witness, to the size the witness cosigned (or past
// it), with other records. Back with the witness, the start-up checkpoint
// gets the real witness's fork answer (409: same size, another root; or
// 422: the consistency proof from its tree does not verify). The signer
// records log.fork_detected, refuses writes (503 log_rollback) across a
// restart, and resumes only after the rollback acknowledgement.
func TestForkAnswerHaltsWrites(t *testing.T) {
	for _, tt := range []struct {
		name  string
		extra int64 // records regrown past the size the witness cosigned
	}{
		{"regrown to the witness's size: 409 root differs", 0},
		{"regrown past the witness's size: 422 proof fails", 2},
	} {
		t.Run(tt.name, func(t *testing.T) { testForkAnswer(t, tt.extra) })
	}
}

func testForkAnswer(t *testing.T, extra int64) {
	var w *realWitness
	e := newEnv(t, func(o *signer.Options) {
		w = newRealWitness(t, "w1.example", writeLogKey(t, o.KeyFile))
		o.Witnesses = []signer.Witness{w.client()}
		o.TrustedWitnesses = []verify.TrustedWitness{w.trusted()}
		o.WitnessQuorum = 1
	})
	run := e.register(agentTok)
	e.decide(agentTok, run, "c1", "Bash", `{}`)
	if res, _ := e.verify(run); len(res.Witnesses) != 1 {
		t.Fatalf("Verify() = %+v, want cosigned", res)
	}
	cp, err := e.db.LatestCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cosigned := cp.Size

	// Restore an empty backup (the key is kept) and regrow to the size
	// the witness cosigned, without the witness.
	e.close()
	for _, f := range []string{sqlite.FileName, sqlite.FileName + "-wal", sqlite.FileName + "-shm"} {
		if err := os.Remove(filepath.Join(e.dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	witnesses := e.opts.Witnesses
	e.opts.Witnesses = nil
	e.open()
	for {
		n, err := e.db.TreeSize(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == cosigned+extra {
			break
		}
		e.register(agentTok)
	}
	e.close()
	e.opts.Witnesses = witnesses
	e.open()

	if got := e.s.Halted(); got != verify.TypeForkDetected {
		t.Fatalf("Halted() = %q after the witness's fork answer, want %q", got, verify.TypeForkDetected)
	}
	var eb map[string]any
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs", nil, &eb); st != 503 || eb["error"] != "log_rollback" {
		t.Fatalf("register after a fork answer = %d %v, want 503 log_rollback", st, eb)
	}
	logs := e.logRecords()
	last := logs[len(logs)-1]
	if last.Type != verify.TypeForkDetected || last.Body["witness_size"] != cosigned || last.Body["log_size"] != cosigned+extra ||
		last.Body["witness"] != int64(0) || last.Body["log_root"] == "" {
		t.Fatalf("last _log record = %s %v, want %s with witness 0, sizes %d and %d, and the log root", last.Type, last.Body, verify.TypeForkDetected, cosigned, cosigned+extra)
	}
	// The refusal survives a restart, then the operator acknowledges.
	e.close()
	e.opts.Witnesses = nil
	e.open()
	if _, err := e.s.Register(context.Background(), identity()); !errors.Is(err, signer.ErrLogRollback) || e.s.Halted() != verify.TypeForkDetected {
		t.Fatalf("Register after restart = %v (Halted %q), want ErrLogRollback for the fork", err, e.s.Halted())
	}
	if st := e.call(e.admin, "", "POST", "/v1/signer/log/rollback/acknowledge", nil, nil); st != 204 {
		t.Fatalf("acknowledge = %d", st)
	}
	if got := e.s.Halted(); got != "" {
		t.Errorf("Halted() after acknowledge = %q, want \"\"", got)
	}
	e.register(agentTok)
}

// TestHostileForkAnswer: a witness that answers every checkpoint with a
// fork 409 (without a size) makes the signer halt writes; the fork is
// recorded once.
func TestHostileForkAnswer(t *testing.T) {
	hostile := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Error(rw, "checkpoint root differs from the cosigned root at the same size", http.StatusConflict)
	}))
	defer hostile.Close()
	e := newEnv(t, func(o *signer.Options) {
		o.Witnesses = []signer.Witness{&witness.Client{URL: hostile.URL, Name: "w1.example", HTTPClient: hostile.Client()}}
	})
	e.register(agentTok)
	if _, err := e.s.Checkpoint(context.Background()); !errors.Is(err, signer.ErrLogRollback) {
		t.Fatalf("Checkpoint() = %v, want ErrLogRollback", err)
	}
	if _, err := e.s.Checkpoint(context.Background()); !errors.Is(err, signer.ErrLogRollback) {
		t.Fatalf("second Checkpoint() = %v, want ErrLogRollback", err)
	}
	if _, err := e.s.Register(context.Background(), identity()); !errors.Is(err, signer.ErrLogRollback) {
		t.Fatalf("Register() = %v, want ErrLogRollback", err)
	}
	var forks int
	for _, r := range e.logRecords() {
		if r.Type == verify.TypeForkDetected {
			forks++
		}
	}
	if forks != 1 {
		t.Errorf("%d log.fork_detected records, want 1", forks)
	}
}
