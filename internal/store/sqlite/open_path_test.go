package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenPathIsNotURI: a data directory whose name holds characters
// that mean something in an SQLite URI ('#' starts a fragment, '?' the
// parameters, '%' an escape) is still the directory the database lives
// in: the file is created there and nowhere else, and what is written is
// read back after reopening.
func TestOpenPathIsNotURI(t *testing.T) {
	for _, name := range []string{"data#1", "data?mode=memory", "data%2Fx", "data ?cache=shared#x", "dätä"} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, name)
			ctx := context.Background()
			db, err := Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.exec(ctx, `INSERT INTO api_keys (hash, tenant, agent, session, identity, issued_at, expires_at) VALUES (x'00', 't', 'a', 's', '{}', 0, 0)`); err != nil {
				db.Close()
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
				t.Fatalf("the database is not in the data directory: %v", err)
			}
			entries, err := os.ReadDir(parent)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Name() != name {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("Open(%q) wrote outside its directory: %q", dir, names)
			}
			db, err = Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int
			if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("after reopening: %d rows, %v; want the 1 written", n, err)
			}
		})
	}
}
