package sqlite

import (
	"context"
	"crypto/sha256"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/store/storetest"
	"github.com/agentcustody/custody/internal/witness"
)

func TestWitness(t *testing.T) {
	storetest.Witness(t, func(tb testing.TB) witness.Store { return openTestDB(tb) })
}

// TestWitnessReplicas races handles of several processes on one file.
func TestWitnessReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.WitnessReplicas(t, dbs[0], dbs[1], dbs[2])
}

// TestWitnessTreeSurvivesReopen: the cosigned tree is in the file.
func TestWitnessTreeSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	const origin = "signer.custody.example/log"
	root := tlog.Hash(sha256.Sum256([]byte("nine")))
	if err := db.CompareAndSwapTree(ctx, origin, 0, 9, root); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if size, got, err := db.LatestTree(ctx, origin); err != nil || size != 9 || got != root {
		t.Fatalf("LatestTree() after reopen = %d, %v, %v; want 9, %v", size, got, err, root)
	}
}
