package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/witness"
)

func TestAddCheckpointRequestRoundTrip(t *testing.T) {
	l := newTestLog(t, origin, 13)
	tests := []struct {
		name string
		req  witness.AddCheckpointRequest
		want string // prefix of the body
	}{
		{"old 0", witness.AddCheckpointRequest{OldSize: 0, Checkpoint: l.checkpoint(13)}, "old 0\n\n" + origin + "\n13\n"},
		{"with proof", witness.AddCheckpointRequest{OldSize: 5, Proof: l.proof(5, 13), Checkpoint: l.checkpoint(13)}, "old 5\n" + l.proof(5, 13)[0].String() + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.req.Marshal()
			if err != nil || !bytes.HasPrefix(b, []byte(tt.want)) {
				t.Fatalf("Marshal() = %q, %v, want prefix %q", b, err, tt.want)
			}
			got, err := witness.ParseAddCheckpointRequest(b)
			if err != nil || got.OldSize != tt.req.OldSize || len(got.Proof) != len(tt.req.Proof) || !bytes.Equal(got.Checkpoint, tt.req.Checkpoint) {
				t.Fatalf("ParseAddCheckpointRequest(Marshal()) = %+v, %v, want %+v", got, err, tt.req)
			}
			for i := range got.Proof {
				if got.Proof[i] != tt.req.Proof[i] {
					t.Errorf("proof[%d] = %v, want %v", i, got.Proof[i], tt.req.Proof[i])
				}
			}
		})
	}
	for _, bad := range []witness.AddCheckpointRequest{
		{OldSize: -1, Checkpoint: []byte("x")},
		{OldSize: 1},
		{OldSize: 1, Proof: make(tlog.TreeProof, 64), Checkpoint: []byte("x")},
	} {
		if _, err := bad.Marshal(); !errors.Is(err, witness.ErrMalformed) {
			t.Errorf("Marshal(%d, %d hashes, %q) = %v, want ErrMalformed", bad.OldSize, len(bad.Proof), bad.Checkpoint, err)
		}
	}
}

// FuzzParseAddCheckpointRequest: the parser never panics, accepts only what
// Marshal writes back byte for byte, and errors wrap ErrMalformed.
func FuzzParseAddCheckpointRequest(f *testing.F) {
	l := newTestLog(f, origin, 13)
	for _, s := range [][]byte{
		l.body(0, 13), l.body(5, 13), l.body(12, 13), l.body(13, 13),
		[]byte(""), []byte("old 0\n"), []byte("old 0\n\n"), []byte("old 00\n\nx"), []byte("old 1\nAAAA\n\nx"),
		[]byte("old 9223372036854775807\n\nx"), []byte("old 9223372036854775808\n\nx"),
		[]byte("old 1\n" + tlog.Hash{}.String() + "\n\n\n"),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := witness.ParseAddCheckpointRequest(body)
		if err != nil {
			if !errors.Is(err, witness.ErrMalformed) {
				t.Fatalf("ParseAddCheckpointRequest() = %v, want ErrMalformed", err)
			}
			return
		}
		b, err := r.Marshal()
		if err != nil || !bytes.Equal(b, body) {
			t.Fatalf("Marshal(Parse(%q)) = %q, %v", body, b, err)
		}
	})
}

// memStore is an in-memory witness.Store for the fuzzer.
type memStore struct {
	mu    sync.Mutex
	trees map[string]struct {
		size int64
		root tlog.Hash
	}
}

func (m *memStore) LatestTree(_ context.Context, origin string) (int64, tlog.Hash, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.trees[origin]
	return t.size, t.root, nil
}

func (m *memStore) CompareAndSwapTree(_ context.Context, origin string, old, n int64, root tlog.Hash) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.trees[origin]
	if t.size != old {
		return &witness.ConflictError{Size: t.size}
	}
	if n == old && t.size > 0 && t.root != root {
		return witness.ErrFork
	}
	t.size, t.root = n, root
	m.trees[origin] = t
	return nil
}

// FuzzAddCheckpoint: whatever the body, the witness never panics, answers
// with a status the spec defines, and never moves its tree backwards.
func FuzzAddCheckpoint(f *testing.F) {
	l := newTestLog(f, origin, 13)
	for _, s := range [][]byte{l.body(0, 13), l.body(0, 5), l.body(5, 13), l.body(13, 13), l.fork(3).body(0, 13), []byte("old 0\n\nx\n\n— y AAAA\n")} {
		f.Add(s)
	}
	store := &memStore{trees: map[string]struct {
		size int64
		root tlog.Hash
	}{}}
	w, err := witness.New(witness.Options{
		Name: witnessName, Key: ed25519.NewKeyFromSeed(make([]byte, 32)), Store: store,
		Logs: []witness.LogConfig{{Origin: origin, VerifierKeys: []string{l.vkey}}},
		Now:  func() time.Time { return time.Unix(1764064800, 0) },
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before, _, _ := store.LatestTree(context.Background(), origin)
		r, err := witness.ParseAddCheckpointRequest(body)
		if err == nil {
			_, err = w.AddCheckpoint(context.Background(), r.OldSize, r.Proof, r.Checkpoint)
		}
		if code := witness.HTTPStatusFor(err); code == 500 {
			t.Fatalf("AddCheckpoint(%q) = %v (500)", body, err)
		}
		if after, _, _ := store.LatestTree(context.Background(), origin); after < before {
			t.Fatalf("tree went back from %d to %d", before, after)
		}
	})
}
