package sqlite

import (
	"context"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func openSignerTestDB(tb testing.TB, dir string) *DB {
	tb.Helper()
	db, err := Open(context.Background(), dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func TestSignerStore(t *testing.T) {
	storetest.Signer(t, func(tb testing.TB) signer.Store { return openSignerTestDB(tb, tb.TempDir()) })
}

// TestSignerStoreReplicas: two handles on one file, as two processes
// sharing a data directory hold, never fork the log.
func TestSignerStoreReplicas(t *testing.T) {
	dir := t.TempDir()
	storetest.SignerReplicas(t, openSignerTestDB(t, dir), openSignerTestDB(t, dir))
}
