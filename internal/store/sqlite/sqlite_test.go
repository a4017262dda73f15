package sqlite

import (
	"context"
	"database/sql"
	"testing"
)

// TestOpenConnectionSettings: every connection of the pool, not only the
// first, runs with the settings the package doc promises (they are
// per-connection in SQLite).
func TestOpenConnectionSettings(t *testing.T) {
	ctx := context.Background()
	db := openSignerTestDB(t, t.TempDir())
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 3 { // held at once: three distinct connections
		c, err := db.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		for _, p := range []struct {
			pragma string
			want   string
		}{
			{"journal_mode", "wal"},
			{"synchronous", "2"}, // FULL
			{"foreign_keys", "1"},
			{"temp_store", "2"}, // MEMORY
			{"busy_timeout", "10000"},
			{"wal_autocheckpoint", "4000"},
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != p.want {
				t.Errorf("connection %d: PRAGMA %s = %s, want %s", i, p.pragma, got, p.want)
			}
		}
	}
}
