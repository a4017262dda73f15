package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/internal/witness"
	"github.com/agentcustody/custody/verify"
)

func TestAddCheckpoint(t *testing.T) {
	l := newTestLog(t, origin, 20)
	other := newTestLog(t, "other.example/log", 3)
	strangerSkey, _, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := note.NewSigner(strangerSkey)
	if err != nil {
		t.Fatal(err)
	}
	forked := l.fork(5)
	req := func(old int64, proof tlog.TreeProof, cp []byte) []byte {
		b, err := witness.AddCheckpointRequest{OldSize: old, Proof: proof, Checkpoint: cp}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	badProof := func(old, n int64) tlog.TreeProof {
		p := append(tlog.TreeProof(nil), l.proof(old, n)...)
		p[0][0] ^= 1
		return p
	}
	tamperedSig := func(n int64) []byte {
		cp := l.checkpoint(n)
		// Flip a bit of the Ed25519 signature (after the 4-byte key hash).
		i := bytes.LastIndexByte(cp[:len(cp)-1], ' ') + 1
		raw, err := base64.StdEncoding.DecodeString(string(cp[i : len(cp)-1]))
		if err != nil {
			t.Fatal(err)
		}
		raw[10] ^= 1
		return append(cp[:i:i], base64.StdEncoding.EncodeToString(raw)+"\n"...)
	}
	tests := []struct {
		name      string
		prep      [][2]int64 // (old, new) pairs to add first, each must succeed
		body      func() []byte
		want      int
		wantSize  string // body of a 409 with text/x.tlog.size; "" if none
		wantTree  int64  // stored size afterwards
		wantError bool   // an Error is logged (fork)
	}{
		{"first checkpoint from 0, empty proof", nil, func() []byte { return l.body(0, 5) }, 200, "", 5, false},
		{"growth with a proof", [][2]int64{{0, 5}}, func() []byte { return l.body(5, 12) }, 200, "", 12, false},
		{"growth twice", [][2]int64{{0, 1}, {1, 7}}, func() []byte { return l.body(7, 20) }, 200, "", 20, false},
		{"idempotent re-add", [][2]int64{{0, 5}}, func() []byte { return l.body(5, 5) }, 200, "", 5, false},
		{"tree of size 0 cosigned, not stored", nil, func() []byte { return l.body(0, 0) }, 200, "", 0, false},
		{"tree of size 0 with an all-zero root", nil, func() []byte {
			text, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: origin, TreeSize: 0, Root: tlog.Hash{}})
			if err != nil {
				t.Fatal(err)
			}
			cp, err := note.Sign(&note.Note{Text: string(text)}, l.signer)
			if err != nil {
				t.Fatal(err)
			}
			return req(0, nil, cp)
		}, 422, "", 0, false},
		{"extra signature by unknown key ignored", nil, func() []byte { return req(0, nil, l.checkpoint(4, l.signer, stranger)) }, 200, "", 4, false},
		{"unknown log", nil, func() []byte { return other.body(0, 2) }, 404, "", 0, false},
		{"signed by unknown key only", nil, func() []byte { return req(0, nil, l.checkpoint(5, stranger)) }, 403, "", 0, false},
		{"tampered log signature", nil, func() []byte { return req(0, nil, tamperedSig(5)) }, 403, "", 0, false},
		{"old size behind", [][2]int64{{0, 8}}, func() []byte { return l.body(5, 12) }, 409, "8\n", 8, false},
		{"old size 0 after first", [][2]int64{{0, 8}}, func() []byte { return l.body(0, 12) }, 409, "8\n", 8, false},
		{"old size ahead", [][2]int64{{0, 5}}, func() []byte { return l.body(8, 12) }, 409, "5\n", 5, false},
		{"old size on empty witness", nil, func() []byte { return l.body(3, 12) }, 409, "0\n", 0, false},
		{"shrink: old above checkpoint size", [][2]int64{{0, 8}}, func() []byte { return req(8, nil, l.checkpoint(5)) }, 400, "", 8, false},
		{"shrink: stale checkpoint from its own size", [][2]int64{{0, 8}}, func() []byte { return l.body(5, 5) }, 409, "8\n", 8, false},
		{"bad proof", [][2]int64{{0, 5}}, func() []byte { return req(5, badProof(5, 12), l.checkpoint(12)) }, 422, "", 5, false},
		{"proof for another old size", [][2]int64{{0, 5}}, func() []byte { return req(5, l.proof(4, 12), l.checkpoint(12)) }, 422, "", 5, false},
		{"missing proof", [][2]int64{{0, 5}}, func() []byte { return req(5, nil, l.checkpoint(12)) }, 422, "", 5, false},
		{"proof from size 0", nil, func() []byte { return req(0, l.proof(3, 12), l.checkpoint(12)) }, 422, "", 0, false},
		{"proof between equal sizes", [][2]int64{{0, 5}}, func() []byte { return req(5, l.proof(3, 5), l.checkpoint(5)) }, 422, "", 5, false},
		{"fork: same size, different root", [][2]int64{{0, 8}}, func() []byte { return forked.body(8, 8) }, 409, "", 8, true},
		{"fork: growth from a forked tree", [][2]int64{{0, 8}}, func() []byte { return req(8, forked.proof(8, 12), forked.checkpoint(12)) }, 422, "", 8, false},
		{"malformed: checkpoint text", nil, func() []byte { return []byte("old 0\n\nnot a checkpoint\n\n— x AAAA\n") }, 400, "", 0, false},
		{"malformed: checkpoint without signatures", nil, func() []byte {
			cp := l.checkpoint(5)
			return req(0, nil, cp[:bytes.Index(cp, []byte("\n\n"))+1])
		}, 400, "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, l)
			for _, p := range tt.prep {
				e.add(t, p[0], p[1])
			}
			body := tt.body()
			code, ctype, resp := e.post(t, body)
			if code != tt.want {
				t.Fatalf("POST /add-checkpoint = %d %q, want %d", code, resp, tt.want)
			}
			if tt.wantSize != "" && (ctype != witness.SizeContentType || resp != tt.wantSize) {
				t.Errorf("409 answer = %q (%s), want %q (%s)", resp, ctype, tt.wantSize, witness.SizeContentType)
			}
			if tt.want == http.StatusConflict && tt.wantSize == "" && ctype == witness.SizeContentType {
				t.Errorf("fork answered with %s; want a non-size 409", ctype)
			}
			if tt.want == 200 {
				req, err := witness.ParseAddCheckpointRequest(body)
				if err != nil {
					t.Fatal(err)
				}
				checkCosignature(t, l, req.Checkpoint, []byte(resp), e.witVKey, tt.wantTree)
			}
			if size, _, err := e.db.LatestTree(context.Background(), origin); err != nil || size != tt.wantTree {
				t.Errorf("LatestTree() = %d, %v, want %d", size, err, tt.wantTree)
			}
			if got := e.logs.errors.Load() > 0; got != tt.wantError {
				t.Errorf("error logged = %v, want %v", got, tt.wantError)
			}
		})
	}
}

// checkCosignature checks that sigs is one cosignature/v1 line by the
// witness that verifies with its vkey, and, for a non-empty tree, that the
// public verifier accepts a bundle cosigned with it.
func checkCosignature(t *testing.T, l *testLog, checkpoint, sigs []byte, vkey string, size int64) {
	t.Helper()
	if !bytes.HasPrefix(sigs, []byte("— "+witnessName+" ")) || bytes.Count(sigs, []byte("\n")) != 1 || !bytes.HasSuffix(sigs, []byte("\n")) {
		t.Fatalf("cosignature lines = %q, want one line by %s", sigs, witnessName)
	}
	if size == 0 {
		return
	}
	if err := l.verifyCosigned(size, checkpoint, sigs, vkey); err != nil {
		t.Errorf("verify.Verify(bundle with witness cosignature) = %v", err)
	}
	if err := l.verifyCosigned(size, checkpoint, nil, vkey); err == nil {
		t.Errorf("verify.Verify(bundle without cosignature) = nil, want an error")
	}
}

func TestAddCheckpointMalformed(t *testing.T) {
	l := newTestLog(t, origin, 12)
	e := newEnv(t, l)
	e.add(t, 0, 5)
	valid := string(l.body(5, 12))
	cp := string(l.checkpoint(12))
	proof := l.proof(5, 12)
	line := proof[0].String() + "\n"
	tests := []struct {
		name string
		body string
		want int
	}{
		{"empty", "", 400},
		{"no newline", "old 5", 400},
		{"no old prefix", "5\n\n" + cp, 400},
		{"old size not a number", "old x\n\n" + cp, 400},
		{"old size leading zero", "old 05\n" + line + "\n" + cp, 400},
		{"old size negative", "old -1\n\n" + cp, 400},
		{"old size plus sign", "old +5\n" + line + "\n" + cp, 400},
		{"two spaces", "old  5\n\n" + cp, 400},
		{"no empty line", "old 5\n" + line, 400},
		{"no checkpoint", "old 5\n" + line + "\n", 400},
		{"proof line not base64", "old 5\n" + strings.Repeat("!", 44) + "\n\n" + cp, 400},
		{"proof line short", "old 5\nAAAA\n\n" + cp, 400},
		{"proof line unpadded", "old 5\n" + strings.TrimRight(line, "=\n") + "\n\n" + cp, 400},
		{"too many proof lines", "old 5\n" + strings.Repeat(line, 64) + "\n" + cp, 400},
		{"checkpoint not a note", "old 5\n" + line + "\nhello\n", 400},
		{"CRLF", strings.ReplaceAll(valid, "\n", "\r\n"), 400},
		{"too large", "old 5\n\n" + strings.Repeat("x", witness.MaxRequestSize), 413},
		{"valid after all that", valid, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, _, resp := e.post(t, []byte(tt.body)); code != tt.want {
				t.Errorf("POST /add-checkpoint = %d %q, want %d", code, resp, tt.want)
			}
		})
	}
	resp, err := e.srv.Client().Get(e.srv.URL + "/add-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /add-checkpoint = %d, want 405", resp.StatusCode)
	}
}

// TestAddCheckpointConcurrent races clients that each follow the witness
// (retrying from the size in a 409) while a monitor watches the stored
// size: it never goes backwards, and successful updates form one chain
// (no two from the same old size, so none was lost).
func TestAddCheckpointConcurrent(t *testing.T) {
	const final = 60
	l := newTestLog(t, origin, final)
	e := newEnv(t, l)
	ctx := context.Background()
	var (
		mu        sync.Mutex
		successes = map[int64]int64{}
		conflicts int
		wg        sync.WaitGroup
		stop      = make(chan struct{})
		monitor   = make(chan error, 1)
	)
	go func() {
		var last int64
		for {
			select {
			case <-stop:
				monitor <- nil
				return
			default:
			}
			size, _, err := e.db.LatestTree(ctx, origin)
			if err == nil && size < last {
				err = fmt.Errorf("stored size went back from %d to %d", last, size)
			}
			if err != nil {
				monitor <- err
				return
			}
			last = size
		}
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			old := int64(0)
			for i := 0; old < final; i++ {
				n := min(final, old+1+int64((g*7+i)%5))
				if g%3 == 0 && i%4 == 3 && old > 2 {
					// A stale old size, as from a client that lost a race.
					old -= 2
				}
				_, err := e.client.AddCheckpoint(ctx, old, l.proof(old, n), l.checkpoint(n))
				var conflict *witness.ConflictError
				switch {
				case err == nil:
					mu.Lock()
					if prev, dup := successes[old]; dup && prev != n {
						t.Errorf("witness cosigned %d -> %d and %d -> %d", old, prev, old, n)
					}
					successes[old] = n
					mu.Unlock()
					old = n
				case errors.As(err, &conflict):
					mu.Lock()
					conflicts++
					mu.Unlock()
					old = conflict.Size
				default:
					t.Errorf("AddCheckpoint(%d -> %d) = %v", old, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-monitor; err != nil {
		t.Error(err)
	}
	if conflicts == 0 {
		t.Error("no request lost a race; the test did not exercise concurrency")
	}
	t.Logf("%d updates, %d conflicts", len(successes), conflicts)
	size, n := int64(0), 0
	for next, ok := successes[size]; ok; next, ok = successes[size] {
		size, n = next, n+1
	}
	if n != len(successes) || size != final {
		t.Errorf("successes chain %d of %d updates to size %d, want all to %d: %v", n, len(successes), size, final, successes)
	}
	if got, root, err := e.db.LatestTree(ctx, origin); err != nil || got != final || root != l.root(final) {
		t.Errorf("LatestTree() = %d, %v, want %d", got, err, final)
	}
}

func TestPersistenceAcrossReopen(t *testing.T) {
	l := newTestLog(t, origin, 12)
	e := newEnv(t, l)
	e.add(t, 0, 5)
	e.srv.Close()
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(context.Background(), e.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e.db = db
	e.start(t)
	_, err = e.client.AddCheckpoint(context.Background(), 0, nil, l.checkpoint(9))
	var conflict *witness.ConflictError
	if !errors.As(err, &conflict) || conflict.Size != 5 {
		t.Fatalf("AddCheckpoint(0 -> 9) after reopen = %v, want ConflictError{5}", err)
	}
	checkCosignature(t, l, l.checkpoint(9), e.add(t, 5, 9), e.witVKey, 9)
}

func TestNew(t *testing.T) {
	l := newTestLog(t, origin, 0)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	db, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	good := witness.Options{Name: witnessName, Key: key, Store: db, Logs: []witness.LogConfig{{Origin: origin, VerifierKeys: []string{l.vkey}}}}
	tests := []struct {
		name string
		edit func(o *witness.Options)
		ok   bool
	}{
		{"valid", func(o *witness.Options) {}, true},
		{"same origin twice merges", func(o *witness.Options) { o.Logs = append(o.Logs, o.Logs[0]) }, true},
		{"no name", func(o *witness.Options) { o.Name = "" }, false},
		{"name with space", func(o *witness.Options) { o.Name = "w 1" }, false},
		{"no key", func(o *witness.Options) { o.Key = nil }, false},
		{"no store", func(o *witness.Options) { o.Store = nil }, false},
		{"no logs", func(o *witness.Options) { o.Logs = nil }, false},
		{"log without keys", func(o *witness.Options) { o.Logs = []witness.LogConfig{{Origin: origin}} }, false},
		{"bad vkey", func(o *witness.Options) {
			o.Logs = []witness.LogConfig{{Origin: origin, VerifierKeys: []string{"nope"}}}
		}, false},
		{"bad origin", func(o *witness.Options) { o.Logs = []witness.LogConfig{{Origin: "", VerifierKeys: []string{l.vkey}}} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			o.Logs = append([]witness.LogConfig(nil), good.Logs...)
			tt.edit(&o)
			w, err := witness.New(o)
			if (err == nil) != tt.ok {
				t.Fatalf("New() = %v, want ok %v", err, tt.ok)
			}
			if err == nil && !strings.HasPrefix(w.VerifierKey(), witnessName+"+") {
				t.Errorf("VerifierKey() = %q", w.VerifierKey())
			}
		})
	}
}

func TestHTTPStatusFor(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 200},
		{fmt.Errorf("x: %w", witness.ErrMalformed), 400},
		{witness.ErrUnknownLog, 404},
		{witness.ErrBadSignature, 403},
		{&witness.ConflictError{Size: 3}, 409},
		{witness.ErrFork, 409},
		{witness.ErrBadProof, 422},
		{errors.New("disk on fire"), 500},
	}
	for _, tt := range tests {
		if got := witness.HTTPStatusFor(tt.err); got != tt.want {
			t.Errorf("HTTPStatusFor(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
