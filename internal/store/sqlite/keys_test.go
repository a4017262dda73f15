package sqlite

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestKeys(t *testing.T) {
	storetest.Keys(t, func(tb testing.TB) apikey.Store { return openTestDB(tb) })
}

// openReplicas opens n handles on one fresh data directory, as n
// processes sharing it would.
func openReplicas(t testing.TB, n int) []*DB {
	t.Helper()
	dir := t.TempDir()
	dbs := make([]*DB, n)
	for i := range dbs {
		db, err := Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs
}

// TestKeysReplicas races handles of several processes on one file.
func TestKeysReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.KeysReplicas(t, dbs[0], dbs[1], dbs[2])
}

func TestReopenKeepsKeys(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Unix(1_800_000_000, 0).UTC()
	r := apikey.Record{
		Hash:     sha256.Sum256([]byte("durable")),
		Identity: apikey.Identity{Tenant: "agents", Agent: "run-1", Session: "pod-durable", Method: "kubernetes"},
		IssuedAt: issued, ExpiresAt: issued.Add(time.Hour),
	}
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
