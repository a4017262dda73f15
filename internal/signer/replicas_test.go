package signer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/verify"
)

// replicaDir holds what replicas of one deployment share besides the
// database: the log's key file and the policy directory.
func replicaDir(t testing.TB) string {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "policies")
	if err := os.MkdirAll(pdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "agents.yaml"), []byte(allowBash), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openPG opens n pools on one fresh PostgreSQL schema, closed at cleanup.
func openPG(t testing.TB, n int) []*postgres.DB {
	t.Helper()
	u := pgtest.Schema(t)
	dbs := make([]*postgres.DB, n)
	for i := range dbs {
		db, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs
}

// errorLog keeps the errors logged at Error level.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (h *errorLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *errorLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *errorLog) WithGroup(string) slog.Handler            { return h }
func (h *errorLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *errorLog) logged(target error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.errs {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// lease takes db's writer lease, released at cleanup (after the signer
// started later is closed).
func lease(t testing.TB, db *postgres.DB) *postgres.SignerWriter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := db.AcquireSignerWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	return w
}

// replica is one replica's signer over store, with its agent API served.
type replica struct {
	s   *signer.Signer
	api *httptest.Server
	log *errorLog
}

func startReplica(t testing.TB, dir string, store signer.Store) *replica {
	t.Helper()
	r := &replica{log: &errorLog{}}
	s, err := signer.New(context.Background(), signer.Options{
		Store: store, KeyFile: filepath.Join(dir, "signer.key"), PolicyDir: filepath.Join(dir, "policies"),
		Log:         slog.New(r.log),
		IdleTimeout: time.Hour, IdleCheckInterval: time.Hour, CheckpointInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	h := s.Handler()
	r.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(w, req.WithContext(apikey.WithRecord(req.Context(), apikey.Record{Identity: identity()})))
	}))
	t.Cleanup(r.close)
	return r
}

func (r *replica) close() {
	r.api.Close()
	r.s.Close()
}

func (r *replica) decide(t testing.TB, run, callID string) error {
	t.Helper()
	_, err := r.s.Decide(context.Background(), identity(), run, signer.DecideRequest{CallID: callID, Tool: "Bash", Args: []byte(`{"command":"ls"}`)})
	return err
}

// registerHTTP posts a run registration and returns the status and the
// error code of a refusal.
func (r *replica) registerHTTP(t testing.TB) (int, string) {
	t.Helper()
	resp, err := http.Post(r.api.URL+"/v1/signer/runs", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error
}

// verifyLog checks the stored log as a whole: its leaves are indexes 0
// to size-1, each once, and every run's exported bundle verifies against
// s's trust.
func verifyLog(t testing.TB, s *signer.Signer, store signer.Store, runs ...string) int64 {
	t.Helper()
	ctx := context.Background()
	size, err := store.TreeSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, size)
	tj, err := s.Trust().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	trust, err := verify.ParseTrust(tj)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range append([]string{verify.LogRun}, runs...) {
		leaves, err := store.RunLeaves(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leaves {
			if l.Index >= size || seen[l.Index] {
				t.Fatalf("leaf %d of run %s: outside the tree of %d or stored twice", l.Index, run, size)
			}
			seen[l.Index] = true
		}
		if run == verify.LogRun {
			continue
		}
		b, err := s.Export(ctx, run)
		if err != nil {
			t.Fatalf("Export(%s) = %v", run, err)
		}
		if _, err := verify.Verify(b, trust); err != nil {
			t.Fatalf("Verify(bundle of %s) = %v", run, err)
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("leaf %d of %d belongs to no run checked", i, size)
		}
	}
	return size
}

// TestReplicasCannotForkLog: two signers started on one PostgreSQL schema
// without the writer lease both load the empty log; the first appends,
// and the second's first append is refused (ErrLogConflict, 503
// log_conflict, logged at Error) with nothing of it stored. The second
// then refuses every write; the first goes on, and the log verifies.
func TestReplicasCannotForkLog(t *testing.T) {
	dbs := openPG(t, 2)
	dir := replicaDir(t)
	a := startReplica(t, dir, dbs[0])
	b := startReplica(t, dir, dbs[1])
	ctx := context.Background()

	info, err := a.s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.decide(t, info.Run, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Register(ctx, identity()); !errors.Is(err, signer.ErrLogConflict) {
		t.Fatalf("second replica's first Register = %v, want ErrLogConflict", err)
	}
	if !b.log.logged(signer.ErrLogConflict) {
		t.Error("the refused replica did not log the conflict at Error")
	}
	if st, code := b.registerHTTP(t); st != http.StatusServiceUnavailable || code != "log_conflict" {
		t.Errorf("register on the refused replica = %d %q, want 503 log_conflict", st, code)
	}
	// It has reloaded the log, but still refuses (no retry on new state).
	if err := b.decide(t, info.Run, "c2"); !errors.Is(err, signer.ErrLogConflict) {
		t.Errorf("Decide on the refused replica = %v, want ErrLogConflict", err)
	}
	if _, err := b.s.Checkpoint(ctx); !errors.Is(err, signer.ErrLogConflict) {
		t.Errorf("Checkpoint on the refused replica = %v, want ErrLogConflict", err)
	}

	for _, c := range []string{"c2", "c3"} {
		if err := a.decide(t, info.Run, c); err != nil {
			t.Fatalf("Decide(%s) on the first replica = %v", c, err)
		}
	}
	if _, err := a.s.CloseRun(ctx, identity(), info.Run); err != nil {
		t.Fatal(err)
	}
	if size := verifyLog(t, a.s, dbs[0], info.Run); size != 5 {
		t.Errorf("tree size = %d, want 5 (register, 3 decides, close)", size)
	}
}

// TestReplicasWriterLease: replicas that take the writer lease before
// starting their signer hand the log over without a conflict: the
// second waits while the first holds the lease, then continues the first
// one's open run.
func TestReplicasWriterLease(t *testing.T) {
	dbs := openPG(t, 2)
	dir := replicaDir(t)
	ctx := context.Background()
	wa := lease(t, dbs[0])
	a := startReplica(t, dir, wa.Store())
	info, err := a.s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}

	got := make(chan *postgres.SignerWriter, 1)
	go func() {
		w, err := dbs[1].AcquireSignerWriter(ctx)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- w
	}()
	for i := range 3 {
		if err := a.decide(t, info.Run, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-got:
		t.Fatal("second replica took the lease while the first held it")
	case <-time.After(300 * time.Millisecond):
	}
	a.close()
	wa.Release()
	wb, ok := <-got
	if !ok {
		t.FailNow()
	}
	t.Cleanup(wb.Release)
	b := startReplica(t, dir, wb.Store())
	if err := b.decide(t, info.Run, "b0"); err != nil {
		t.Fatalf("Decide on the new lease holder = %v", err)
	}
	if _, err := b.s.CloseRun(ctx, identity(), info.Run); err != nil {
		t.Fatal(err)
	}
	if size := verifyLog(t, b.s, dbs[1], info.Run); size != 6 {
		t.Errorf("tree size = %d, want 6", size)
	}
}

// TestReplicasWriterTakenOver: a replica whose lease connection dies
// while its signer runs is taken over by another; the first then refuses
// writes (503 log_conflict) instead of appending beside the new holder,
// which continues the log.
func TestReplicasWriterTakenOver(t *testing.T) {
	dbs := openPG(t, 2)
	dir := replicaDir(t)
	ctx := context.Background()
	wa := lease(t, dbs[0])
	a := startReplica(t, dir, wa.Store())
	info, err := a.s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}
	// The lease session dies (a network partition, a server restart).
	terminateBackend(t, wa.PID())
	select {
	case <-wa.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost() not closed 30s after the lease session died")
	}
	wb := lease(t, dbs[1])
	b := startReplica(t, dir, wb.Store())

	if err := a.decide(t, info.Run, "a1"); !errors.Is(err, signer.ErrLogConflict) {
		t.Fatalf("Decide on the replica that lost its lease = %v, want ErrLogConflict", err)
	}
	if st, code := a.registerHTTP(t); st != http.StatusServiceUnavailable || code != "log_conflict" {
		t.Errorf("register on the replica that lost its lease = %d %q, want 503 log_conflict", st, code)
	}
	if err := b.decide(t, info.Run, "b1"); err != nil {
		t.Fatalf("Decide on the new holder = %v", err)
	}
	if size := verifyLog(t, b.s, dbs[1], info.Run); size != 2 {
		t.Errorf("tree size = %d, want 2", size)
	}
}

// terminateBackend ends the server process pid, as a dead connection
// would.
func terminateBackend(t testing.TB, pid uint32) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int64(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}
