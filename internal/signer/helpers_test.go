package signer_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/verify"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newClock() *clock { return &clock{now: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)} }

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// env is a signer on SQLite in a temp dir, served over httptest with a
// fake key verifier: the bearer token is "tenant/agent/session".
type env struct {
	t      testing.TB
	dir    string
	db     *sqlite.DB
	s      *signer.Signer
	clock  *clock
	api    *httptest.Server
	admin  *httptest.Server
	opts   signer.Options
	closed bool
}

const allowBash = `rules:
  - id: AGENTS-001
    effect: allow
    tool: Bash
  - id: AGENTS-002
    effect: allow
    tool: WebFetch
  - id: AGENTS-003
    effect: ask
    tool: Deploy
`

func newEnv(t testing.TB, mod func(*signer.Options)) *env {
	t.Helper()
	dir := t.TempDir()
	pdir := filepath.Join(dir, "policies")
	os.MkdirAll(pdir, 0o700)
	if err := os.WriteFile(filepath.Join(pdir, "agents.yaml"), []byte(allowBash), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, clock: newClock()}
	e.opts = signer.Options{
		KeyFile:     filepath.Join(dir, "signer.key"),
		PolicyDir:   pdir,
		Now:         e.clock.Now,
		Log:         slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		IdleTimeout: time.Hour, IdleCheckInterval: time.Hour, CheckpointInterval: time.Hour,
	}
	if mod != nil {
		mod(&e.opts)
	}
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := sqlite.Open(context.Background(), e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	e.db = db
	e.opts.Store = db
	s, err := signer.New(context.Background(), e.opts)
	if err != nil {
		db.Close()
		e.t.Fatal(err)
	}
	e.s = s
	api := s.Handler()
	e.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := apikey.BearerToken(r)
		parts := strings.Split(tok, "/")
		if len(parts) != 3 {
			api.ServeHTTP(w, r)
			return
		}
		id := apikey.Identity{Tenant: parts[0], Agent: parts[1], Session: parts[2], Method: "kubernetes",
			ServiceAccount: "system:serviceaccount:" + parts[0] + ":support-agent", PodUID: "pod-uid-1",
			SandboxName: parts[1], SandboxUID: "sb-uid-1", ClaimUID: "claim-uid-1"}
		api.ServeHTTP(w, r.WithContext(apikey.WithRecord(r.Context(), apikey.Record{Identity: id})))
	}))
	e.admin = httptest.NewServer(s.AdminHandler())
	e.closed = false
}

func (e *env) close() {
	if e.closed {
		return
	}
	e.closed = true
	e.api.Close()
	e.admin.Close()
	if err := e.s.Close(); err != nil {
		e.t.Errorf("Close: %v", err)
	}
	e.db.Close()
}

const agentTok = "agents/support-agent/pod-1"

// call does one API request and decodes the JSON answer into out (if not nil).
func (e *env) call(srv *httptest.Server, tok, method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func (e *env) register(tok string) string {
	e.t.Helper()
	var info signer.RunInfo
	if st := e.call(e.api, tok, "POST", "/v1/signer/runs", nil, &info); st != 201 {
		e.t.Fatalf("register = %d", st)
	}
	return info.Run
}

func (e *env) decide(tok, run, callID, tool, args string) (signer.DecideResponse, int) {
	e.t.Helper()
	var d signer.DecideResponse
	st := e.call(e.api, tok, "POST", "/v1/signer/runs/"+run+"/decide",
		map[string]any{"call_id": callID, "tool": tool, "args": json.RawMessage(args)}, &d)
	return d, st
}

func (e *env) bundle(run string) []byte {
	e.t.Helper()
	resp, err := http.Get(e.admin.URL + "/v1/signer/runs/" + run + "/bundle")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("bundle = %d %s", resp.StatusCode, b)
	}
	return b
}

func (e *env) verify(run string) (verify.Result, *verify.Bundle) {
	e.t.Helper()
	data := e.bundle(run)
	tj, err := e.s.Trust().Marshal()
	if err != nil {
		e.t.Fatal(err)
	}
	trust, err := verify.ParseTrust(tj)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := verify.Verify(data, trust)
	if err != nil {
		e.t.Fatalf("Verify(bundle of %s) = %v", run, err)
	}
	b, err := verify.ParseBundle(data)
	if err != nil {
		e.t.Fatal(err)
	}
	return res, b
}

// types returns the record types of leaves.
func types(t testing.TB, recs [][]byte) []string {
	var out []string
	for _, raw := range recs {
		r, err := verify.ParseRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Type)
	}
	return out
}

func bundleRecords(b *verify.Bundle) [][]byte {
	var out [][]byte
	for _, r := range b.Records {
		out = append(out, r.Record)
	}
	return out
}

func (e *env) logRecords() []*verify.Record {
	e.t.Helper()
	leaves, err := e.db.RunLeaves(context.Background(), verify.LogRun)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*verify.Record
	for _, l := range leaves {
		r, err := verify.ParseRecord(l.Record)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// fakeWitness cosigns checkpoints per C2SP tlog-cosignature/v1 and keeps
// the latest size, refusing an old size that is not its own (409) with a
// sizeError.
type fakeWitness struct {
	mu     sync.Mutex
	size   int64
	cos    *verify.Cosigner
	vkey   string
	calls  int
	forced int64 // report this size on every call, if > 0
}

type sizeError struct{ size int64 }

func (e *sizeError) Error() string          { return fmt.Sprintf("witness holds tree size %d", e.size) }
func (e *sizeError) WitnessTreeSize() int64 { return e.size }

func newFakeWitness(t testing.TB, name string) *fakeWitness {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	c, err := verify.NewCosigner(name, priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := verify.NewCosignatureVerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return &fakeWitness{cos: c, vkey: vkey}
}

func (w *fakeWitness) AddCheckpoint(ctx context.Context, old int64, proof tlog.TreeProof, signed []byte) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.forced > 0 {
		return nil, &sizeError{w.forced}
	}
	if old != w.size {
		return nil, &sizeError{w.size}
	}
	text, _, ok := bytes.Cut(signed, []byte("\n\n"))
	if !ok {
		return nil, errors.New("malformed note")
	}
	text = append(text, '\n')
	cp, err := verify.ParseCheckpoint(text)
	if err != nil {
		return nil, err
	}
	sig, _ := w.cos.Sign(text)
	w.size = cp.TreeSize
	blob := binary.BigEndian.AppendUint32(nil, w.cos.KeyHash())
	return []byte("— " + w.cos.Name() + " " + base64.StdEncoding.EncodeToString(append(blob, sig...)) + "\n"), nil
}

func identity() apikey.Identity {
	return apikey.Identity{Tenant: "agents", Agent: "support-agent", Session: "pod-1", Method: "kubernetes"}
}
