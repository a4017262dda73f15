package witness_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentcustody/custody/internal/witness"
)

func TestClient(t *testing.T) {
	l := newTestLog(t, origin, 12)
	const sigLine = "— " + witnessName + " AAAAAAAAAAAAAAAAAAAA\n"
	const otherLine = "— other.example BBBBBBBBBBBBBBBBBBBB\n"
	tests := []struct {
		name     string
		status   int
		ctype    string
		body     string
		want     string // cosignature lines on success
		wantSize int64  // ConflictError size; -1 if not a conflict
		wantIs   error
	}{
		{"one cosignature", 200, "text/plain", sigLine, sigLine, -1, nil},
		{"other witnesses' lines dropped", 200, "text/plain", otherLine + sigLine + otherLine, sigLine, -1, nil},
		{"no cosignature by this witness", 200, "text/plain", otherLine, "", -1, nil},
		{"not signature lines", 200, "text/plain", "hello\n", "", -1, nil},
		{"no final newline", 200, "text/plain", sigLine[:len(sigLine)-1], "", -1, nil},
		{"empty 200", 200, "text/plain", "", "", -1, nil},
		{"size conflict", 409, "text/x.tlog.size", "42\n", "", 42, witness.ErrConflict},
		{"size conflict with parameters", 409, "text/x.tlog.size; charset=utf-8", "0\n", "", 0, witness.ErrConflict},
		{"malformed size", 409, "text/x.tlog.size", "forty-two\n", "", -1, nil},
		{"fork", 409, "text/plain", "root mismatch\n", "", -1, witness.ErrFork},
		{"unknown log", 404, "text/plain", "", "", -1, witness.ErrUnknownLog},
		{"bad signature", 403, "text/plain", "", "", -1, witness.ErrBadSignature},
		{"malformed", 400, "text/plain", "", "", -1, witness.ErrMalformed},
		{"bad proof", 422, "text/plain", "", "", -1, witness.ErrBadProof},
		{"server error", 500, "text/plain", "", "", -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				req, err := witness.ParseAddCheckpointRequest(body)
				if r.Method != http.MethodPost || r.URL.Path != "/prefix/add-checkpoint" || err != nil || req.OldSize != 5 || len(req.Proof) == 0 {
					t.Errorf("request %s %s: %v %+v", r.Method, r.URL.Path, err, req)
				}
				rw.Header().Set("Content-Type", tt.ctype)
				rw.WriteHeader(tt.status)
				io.WriteString(rw, tt.body)
			}))
			defer srv.Close()
			c := &witness.Client{URL: srv.URL + "/prefix/", Name: witnessName}
			got, err := c.AddCheckpoint(context.Background(), 5, l.proof(5, 12), l.checkpoint(12))
			var conflict *witness.ConflictError
			switch {
			case tt.want != "":
				if err != nil || string(got) != tt.want {
					t.Errorf("AddCheckpoint() = %q, %v, want %q", got, err, tt.want)
				}
			case tt.wantSize >= 0:
				if !errors.As(err, &conflict) || conflict.Size != tt.wantSize {
					t.Errorf("AddCheckpoint() = %v, want ConflictError{%d}", err, tt.wantSize)
				}
			default:
				if err == nil || errors.As(err, &conflict) {
					t.Errorf("AddCheckpoint() = %q, %v, want a non-conflict error", got, err)
				}
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("AddCheckpoint() = %v, want errors.Is %v", err, tt.wantIs)
			}
			var re *witness.ResponseError
			if tt.status != 200 && tt.wantSize < 0 && tt.name != "malformed size" && (!errors.As(err, &re) || re.StatusCode != tt.status) {
				t.Errorf("AddCheckpoint() = %v, want ResponseError{%d}", err, tt.status)
			}
		})
	}
}

func TestClientErrors(t *testing.T) {
	l := newTestLog(t, origin, 3)
	e := newEnv(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.client.AddCheckpoint(ctx, 0, nil, l.checkpoint(3)); !errors.Is(err, context.Canceled) {
		t.Errorf("AddCheckpoint(canceled) = %v, want context.Canceled", err)
	}
	for _, c := range []*witness.Client{{URL: e.srv.URL}, {Name: witnessName}} {
		if _, err := c.AddCheckpoint(context.Background(), 0, nil, l.checkpoint(3)); err == nil {
			t.Errorf("%+v.AddCheckpoint() = nil, want an error", c)
		}
	}
	if _, err := e.client.AddCheckpoint(context.Background(), -1, nil, l.checkpoint(3)); !errors.Is(err, witness.ErrMalformed) {
		t.Errorf("AddCheckpoint(old -1) = %v, want ErrMalformed", err)
	}
	// Against the real witness: the size in a 409 is what a rollback check reads.
	e.add(t, 0, 3)
	_, err := e.client.AddCheckpoint(context.Background(), 0, nil, l.checkpoint(2))
	var conflict *witness.ConflictError
	if !errors.As(err, &conflict) || conflict.Size != 3 {
		t.Errorf("AddCheckpoint(0 -> 2) = %v, want ConflictError{3}", err)
	}
	if _, err := e.client.AddCheckpoint(context.Background(), 3, nil, l.fork(2).checkpoint(3)); !errors.Is(err, witness.ErrFork) {
		t.Errorf("AddCheckpoint(forked 3) = %v, want ErrFork", err)
	}
}
