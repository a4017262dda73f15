package sqlite

import (
	"context"
	"crypto/sha256"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

func keyRecord(name, agent string, issued time.Time, ttl time.Duration) apikey.Record {
	return apikey.Record{
		Hash:      sha256.Sum256([]byte(name)),
		Identity:  apikey.Identity{Tenant: "agents", Agent: agent, Session: "pod-" + name, Method: "kubernetes", PodUID: "uid-" + name},
		IssuedAt:  issued,
		ExpiresAt: issued.Add(ttl),
	}
}

func TestKeys(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0).UTC()
	a := keyRecord("a", "run-1", now, 15*time.Minute)
	if err := db.InsertKey(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertKey(ctx, a); err == nil {
		t.Error("InsertKey(duplicate hash) = nil, want an error")
	}
	got, err := db.LookupKey(ctx, a.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if got.Identity != a.Identity || !got.IssuedAt.Equal(a.IssuedAt) || !got.ExpiresAt.Equal(a.ExpiresAt) || !got.RevokedAt.IsZero() {
		t.Fatalf("LookupKey() = %+v, want %+v", got, a)
	}
	if _, err := db.LookupKey(ctx, sha256.Sum256([]byte("nope"))); !errors.Is(err, apikey.ErrNotFound) {
		t.Errorf("LookupKey(unknown) = %v, want ErrNotFound", err)
	}

	// Revoke keeps the first revocation time.
	if err := db.RevokeKey(ctx, a.Hash, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeKey(ctx, a.Hash, now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, _ = db.LookupKey(ctx, a.Hash)
	if !got.RevokedAt.Equal(now.Add(time.Minute)) {
		t.Errorf("RevokedAt = %v, want the first revocation %v", got.RevokedAt, now.Add(time.Minute))
	}
	if err := db.RevokeKey(ctx, sha256.Sum256([]byte("nope")), now); !errors.Is(err, apikey.ErrNotFound) {
		t.Errorf("RevokeKey(unknown) = %v, want ErrNotFound", err)
	}
}

func TestRevokeAgentKeys(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0).UTC()
	recs := []apikey.Record{
		keyRecord("live-1", "run-1", now, time.Hour),
		keyRecord("live-2", "run-1", now, time.Hour),
		keyRecord("expired", "run-1", now.Add(-time.Hour), time.Minute),
		keyRecord("other", "run-2", now, time.Hour),
	}
	for _, r := range recs {
		if err := db.InsertKey(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	hashes, err := db.RevokeAgentKeys(ctx, "agents", "run-1", now)
	if err != nil {
		t.Fatal(err)
	}
	want := [][32]byte{recs[0].Hash, recs[1].Hash}
	sort.Slice(hashes, func(i, j int) bool { return string(hashes[i][:]) < string(hashes[j][:]) })
	sort.Slice(want, func(i, j int) bool { return string(want[i][:]) < string(want[j][:]) })
	if len(hashes) != 2 || hashes[0] != want[0] || hashes[1] != want[1] {
		t.Fatalf("RevokeAgentKeys() revoked %d keys, want the 2 live keys of run-1", len(hashes))
	}
	if r, _ := db.LookupKey(ctx, recs[3].Hash); !r.RevokedAt.IsZero() {
		t.Error("another agent's key was revoked")
	}
	// Revoking again finds nothing left.
	if hashes, _ := db.RevokeAgentKeys(ctx, "agents", "run-1", now); len(hashes) != 0 {
		t.Errorf("second RevokeAgentKeys() = %d keys, want 0", len(hashes))
	}
}

func TestReopenKeepsKeys(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	r := keyRecord("durable", "run-1", time.Unix(1_800_000_000, 0).UTC(), time.Hour)
	if err := db.InsertKey(ctx, r); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.LookupKey(ctx, r.Hash); err != nil {
		t.Fatalf("LookupKey() after reopen = %v", err)
	}
}

// TestConcurrentOpen: replicas starting together on one fresh data
// directory each apply every migration once, without failing.
func TestConcurrentOpen(t *testing.T) {
	dir := t.TempDir()
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			db, err := Open(context.Background(), dir)
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open() = %v", err)
		}
	}
}

func TestDeleteExpiredKeys(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0).UTC()
	live := keyRecord("live", "run-1", now, time.Hour)
	dead := keyRecord("dead", "run-1", now.Add(-2*time.Hour), time.Hour)
	for _, r := range []apikey.Record{live, dead} {
		if err := db.InsertKey(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.DeleteExpiredKeys(ctx, now)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpiredKeys() = %d, %v; want 1", n, err)
	}
	if _, err := db.LookupKey(ctx, dead.Hash); !errors.Is(err, apikey.ErrNotFound) {
		t.Errorf("expired key still stored: %v", err)
	}
	if _, err := db.LookupKey(ctx, live.Hash); err != nil {
		t.Errorf("live key deleted: %v", err)
	}
}
