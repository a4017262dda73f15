package sqlite

import (
	"context"
	"database/sql"
	"testing"
)

// TestInsertRows: every row of a batch is written once, in order, across
// the rowsChunk-row statement and the one-row statement for the rest.
func TestInsertRows(t *testing.T) {
	d := openSignerTestDB(t, t.TempDir())
	ctx := context.Background()
	if _, err := d.db.ExecContext(ctx, `CREATE TABLE rows_probe (batch INTEGER, i INTEGER, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	ins := newRowInsert(`INSERT INTO rows_probe (batch, i, v)`, 3)
	for _, n := range []int{0, 1, rowsChunk - 1, rowsChunk, rowsChunk + 1, 3*rowsChunk + 5} {
		err := d.tx(ctx, func(tx *sql.Tx) error {
			return d.insertRows(ctx, tx, ins, n, func(i int) []any { return []any{n, i, "v"} })
		})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		rows, err := d.db.QueryContext(ctx, `SELECT i FROM rows_probe WHERE batch = ? ORDER BY rowid`, n)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for rows.Next() {
			var i int
			if err := rows.Scan(&i); err != nil {
				t.Fatal(err)
			}
			got = append(got, i)
		}
		rows.Close()
		if len(got) != n {
			t.Fatalf("n=%d: %d rows written", n, len(got))
		}
		for i, v := range got {
			if v != i {
				t.Fatalf("n=%d: row %d is %d", n, i, v)
			}
		}
	}
}
