package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// openTestDB opens a database in a fresh schema, closed when t ends.
func openTestDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenMigratesOnceUnderConcurrentReplicas(t *testing.T) {
	u := pgtest.Schema(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := Open(context.Background(), u)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	db, err := Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version, rows int
	if err := db.pool.QueryRow(context.Background(), "SELECT max(version), count(*) FROM custody_schema").Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) || rows != 1 {
		t.Fatalf("custody_schema: version %d in %d rows, want %d in 1", version, rows, len(migrations))
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	u := pgtest.Schema(t)
	db, err := Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(context.Background(), "UPDATE custody_schema SET version = version + 1"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err := Open(context.Background(), u); err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		if err == nil {
			db.Close()
		}
		t.Fatalf("Open of a newer schema: %v, want a refusal", err)
	}
}

func TestOpenErrorNeverQuotesPassword(t *testing.T) {
	const secret = "s3cret-Pa55word"
	_, err := Open(context.Background(), "postgres://custody:"+secret+"@127.0.0.1:1/custody?connect_timeout=2")
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error quotes the password: %v", err)
	}
	_, err = Open(context.Background(), "postgres://custody:"+secret+"@127.0.0.1:notaport/x")
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("bad URL: %v", err)
	}
}
