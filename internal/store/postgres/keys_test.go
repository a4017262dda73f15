package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestKeys(t *testing.T) {
	storetest.Keys(t, func(tb testing.TB) apikey.Store { return openTestDB(tb) })
}

// openReplicas opens n databases (n pools) on one fresh schema, as n
// replicas would.
func openReplicas(t testing.TB, n int) []*DB {
	t.Helper()
	u := pgtest.Schema(t)
	dbs := make([]*DB, n)
	for i := range dbs {
		db, err := Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs
}

func TestKeysReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.KeysReplicas(t, dbs[0], dbs[1], dbs[2])
}

// randomKey returns a key record of tenant/agent with a random hash, so
// that test runs sharing the server (channels are per database) never
// notify each other's keys.
func randomKey(tenant, agent string) apikey.Record {
	var b [32]byte
	rand.Read(b[:])
	now := time.Now().UTC().Truncate(time.Second)
	return apikey.Record{
		Hash:     sha256.Sum256(b[:]),
		Identity: apikey.Identity{Tenant: tenant, Agent: agent, Session: "pod", Method: "static"},
		IssuedAt: now, ExpiresAt: now.Add(time.Hour),
	}
}

// events records what a listener delivered.
type events struct {
	mu        sync.Mutex
	evicted   map[[32]byte]int
	evictAlls int
	pids      []uint32
}

func newEvents() *events { return &events{evicted: map[[32]byte]int{}} }

func (e *events) evict(h [32]byte) { e.mu.Lock(); e.evicted[h]++; e.mu.Unlock() }
func (e *events) evictAll()        { e.mu.Lock(); e.evictAlls++; e.mu.Unlock() }
func (e *events) listening(pid uint32) {
	e.mu.Lock()
	e.pids = append(e.pids, pid)
	e.mu.Unlock()
}

func (e *events) count(h [32]byte) int { e.mu.Lock(); defer e.mu.Unlock(); return e.evicted[h] }
func (e *events) alls() int            { e.mu.Lock(); defer e.mu.Unlock(); return e.evictAlls }
func (e *events) lastPID() uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pids) == 0 {
		return 0
	}
	return e.pids[len(e.pids)-1]
}

// waitFor polls cond every 10 ms and fails t if it does not hold within
// 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startListener runs l on db until the test ends; the test ends only
// after the listener has returned.
func startListener(t *testing.T, db *DB, l *listener) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.listen(ctx, l)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("listener did not return within 10 s of its context's end")
		}
	})
}

// TestListenKeyRevocationsAcrossReplicas: a key verified (and cached) by
// replica b and revoked on replica a is refused by b at once, not after
// b's cache TTL.
func TestListenKeyRevocationsAcrossReplicas(t *testing.T) {
	dbs := openReplicas(t, 2)
	a, b := dbs[0], dbs[1]
	ctx := context.Background()
	svcA, err := apikey.New(apikey.Options{Store: a, CacheTTL: time.Hour, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	svcB, err := apikey.New(apikey.Options{Store: b, CacheTTL: time.Hour, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{}, 1)
	returned := make(chan error, 1)
	go func() {
		returned <- b.ListenKeyRevocations(lctx, svcB.Evict, func() {
			svcB.EvictAll()
			select {
			case ready <- struct{}{}:
			default:
			}
		}, nil)
	}()
	defer func() {
		cancel()
		select {
		case err := <-returned:
			if err != nil {
				t.Errorf("ListenKeyRevocations() after its context ended = %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ListenKeyRevocations did not return within 10 s of its context's end")
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not start listening (no evictAll) within 10 s")
	}

	id := apikey.Identity{Tenant: "agents", Agent: "run-1", Session: "pod-a", Method: "static"}
	one, err := svcA.Mint(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	two, err := svcA.Mint(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []apikey.Minted{one, two} {
		if _, err := svcB.Verify(ctx, m.Key); err != nil {
			t.Fatalf("replica b: Verify() = %v", err)
		}
	}
	if err := svcA.Revoke(ctx, one.Key); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica b to refuse the key revoked on a", func() bool {
		_, err := svcB.Verify(ctx, one.Key)
		return err != nil
	})
	if _, err := svcB.Verify(ctx, one.Key); !errors.Is(err, apikey.ErrRevoked) {
		t.Fatalf("replica b: Verify(revoked on a) = %v, want ErrRevoked", err)
	}
	if n, err := svcA.RevokeAgent(ctx, "agents", "run-1"); err != nil || n != 1 {
		t.Fatalf("RevokeAgent() = %d, %v; want 1", n, err)
	}
	waitFor(t, "replica b to refuse the agent's key revoked on a", func() bool {
		_, err := svcB.Verify(ctx, two.Key)
		return err != nil
	})
}

func TestListenKeyRevocationsRequiresCallbacks(t *testing.T) {
	db := openTestDB(t)
	if err := db.ListenKeyRevocations(context.Background(), nil, func() {}, nil); err == nil {
		t.Error("ListenKeyRevocations(nil evict) = nil, want an error")
	}
	if err := db.ListenKeyRevocations(context.Background(), func([32]byte) {}, nil, nil); err == nil {
		t.Error("ListenKeyRevocations(nil evictAll) = nil, want an error")
	}
}

// TestListenKeyRevocationsDelivery: every key RevokeKey and
// RevokeAgentKeys revoke is delivered once, in batches under the payload
// limit; nothing is sent for an unknown key; a malformed payload evicts
// everything.
func TestListenKeyRevocationsDelivery(t *testing.T) {
	dbs := openReplicas(t, 2)
	a, b := dbs[0], dbs[1]
	ctx := context.Background()
	ev := newEvents()
	startListener(t, b, &listener{evict: ev.evict, evictAll: ev.evictAll, pingEvery: time.Minute,
		minBackoff: 10 * time.Millisecond, maxBackoff: 100 * time.Millisecond, listening: ev.listening})
	waitFor(t, "the listener to listen", func() bool { return ev.alls() >= 1 })

	// Two and a half notifications' worth of one agent's keys.
	const n = 2*maxIDsPerNotification + maxIDsPerNotification/2
	var recs []apikey.Record
	for range n {
		r := randomKey("agents", "many")
		recs = append(recs, r)
		if err := a.InsertKey(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	single := randomKey("agents", "single")
	if err := a.InsertKey(ctx, single); err != nil {
		t.Fatal(err)
	}
	unknown := randomKey("agents", "unknown")
	if err := a.RevokeKey(ctx, unknown.Hash, time.Now()); err == nil {
		t.Fatal("RevokeKey(unknown) = nil, want ErrNotFound")
	}
	hashes, err := a.RevokeAgentKeys(ctx, "agents", "many", time.Now())
	if err != nil || len(hashes) != n {
		t.Fatalf("RevokeAgentKeys() = %d keys, %v; want %d", len(hashes), err, n)
	}
	if err := a.RevokeKey(ctx, single.Hash, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Notifications arrive in commit order: once the last is in, every
	// earlier one is.
	waitFor(t, "the single key's notification", func() bool { return ev.count(single.Hash) == 1 })
	for i, r := range recs {
		if got := ev.count(r.Hash); got != 1 {
			t.Errorf("key %d of %d evicted %d times, want 1", i, n, got)
		}
	}
	if got := ev.count(unknown.Hash); got != 0 {
		t.Errorf("unknown key evicted %d times, want 0 (nothing was revoked)", got)
	}

	before := ev.alls()
	if _, err := a.pool.Exec(ctx, `SELECT pg_notify($1, 'not a key id')`, KeyRevocationChannel); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "evictAll after a malformed payload", func() bool { return ev.alls() > before })
}

// TestListenKeyRevocationsReconnects: when the listener's connection is
// killed it reconnects, calls evictAll (revocations may have been
// missed) and delivers again.
func TestListenKeyRevocationsReconnects(t *testing.T) {
	dbs := openReplicas(t, 2)
	a, b := dbs[0], dbs[1]
	ctx := context.Background()
	ev := newEvents()
	// A short pingEvery makes the listener check its connection between
	// notifications too.
	startListener(t, b, &listener{evict: ev.evict, evictAll: ev.evictAll, pingEvery: 50 * time.Millisecond,
		minBackoff: 10 * time.Millisecond, maxBackoff: 100 * time.Millisecond, listening: ev.listening})
	waitFor(t, "the listener to listen", func() bool { return ev.alls() >= 1 })

	first := randomKey("agents", "run-1")
	if err := a.InsertKey(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeKey(ctx, first.Hash, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first revocation", func() bool { return ev.count(first.Hash) == 1 })

	for round := range 2 {
		pid := ev.lastPID()
		alls := ev.alls()
		var killed bool
		if err := a.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&killed); err != nil || !killed {
			t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
		}
		waitFor(t, fmt.Sprintf("round %d: evictAll on a new connection", round), func() bool {
			return ev.alls() > alls && ev.lastPID() != pid
		})
		k := randomKey("agents", "run-1")
		if err := a.InsertKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := a.RevokeKey(ctx, k.Hash, time.Now()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("round %d: a revocation after the reconnect", round), func() bool { return ev.count(k.Hash) == 1 })
	}
}

// TestListenKeyRevocationsRetriesUnreachable: a listener whose server
// cannot be reached keeps retrying, calls nothing, and returns when its
// context ends.
func TestListenKeyRevocationsRetriesUnreachable(t *testing.T) {
	db := openTestDB(t)
	cfg := db.pool.Config()
	cfg.ConnConfig.Port = 1 // nothing listens there
	cfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ev := newEvents()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&DB{pool: pool}).listen(ctx, &listener{evict: ev.evict, evictAll: ev.evictAll, pingEvery: time.Minute,
			minBackoff: 10 * time.Millisecond, maxBackoff: 40 * time.Millisecond, listening: ev.listening})
	}()
	time.Sleep(300 * time.Millisecond) // several attempts
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not return within 10 s of its context's end")
	}
	if ev.alls() != 0 || ev.lastPID() != 0 {
		t.Errorf("unreachable server: %d evictAll calls, listening pid %d; want none", ev.alls(), ev.lastPID())
	}
}

func TestRevocationPayloads(t *testing.T) {
	var hashes [][32]byte
	for i := range 2*maxIDsPerNotification + 1 {
		hashes = append(hashes, sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
	}
	for _, n := range []int{1, maxIDsPerNotification, maxIDsPerNotification + 1, len(hashes)} {
		payloads := revocationPayloads(hashes[:n])
		if want := (n + maxIDsPerNotification - 1) / maxIDsPerNotification; len(payloads) != want {
			t.Errorf("revocationPayloads(%d hashes) = %d payloads, want %d", n, len(payloads), want)
		}
		var got [][32]byte
		for _, p := range payloads {
			if len(p) >= 8000 {
				t.Errorf("payload of %d bytes, want under PostgreSQL's 8000", len(p))
			}
			hs, ok := parseRevocationPayload(p)
			if !ok {
				t.Fatalf("parseRevocationPayload(%.70q…) failed", p)
			}
			got = append(got, hs...)
		}
		if len(got) != n {
			t.Fatalf("round trip of %d hashes gave %d", n, len(got))
		}
		for i := range got {
			if got[i] != hashes[i] {
				t.Fatalf("round trip: hash %d differs", i)
			}
		}
	}
	id := strings.Repeat("ab", 32)
	for _, bad := range []string{"", ",", id + ",", "," + id, id[:63], id + "0", "zz" + id[2:], id + " "} {
		if _, ok := parseRevocationPayload(bad); ok {
			t.Errorf("parseRevocationPayload(%q) succeeded, want a failure", bad)
		}
	}
}
