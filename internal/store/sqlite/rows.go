package sqlite

import (
	"context"
	"database/sql"
	"strings"
)

// rowsChunk is the row count of an insert's wide statement: a batch of n
// rows runs it n/rowsChunk times and the one-row statement for the rest,
// both prepared once (a statement built for each n would be parsed on
// every call).
const rowsChunk = 16

// rowInsert is an INSERT of width columns, with its one-row and
// rowsChunk-row statements.
type rowInsert struct {
	width      int
	one, chunk string
}

// newRowInsert returns the insert "head VALUES (?,…)" of width columns.
// head must be a constant of this package (the text is a prepared
// statement's key).
func newRowInsert(head string, width int) rowInsert {
	row := "(" + strings.Repeat("?,", width-1) + "?)"
	rows := strings.Repeat(row+",", rowsChunk-1) + row
	return rowInsert{width: width, one: head + " VALUES " + row, chunk: head + " VALUES " + rows}
}

// statements are the two statements' texts, to prepare at Open.
func (ins rowInsert) statements() []string { return []string{ins.one, ins.chunk} }

// insertRows inserts n rows of ins in tx, with args(i) the i-th row's
// width values.
func (d *DB) insertRows(ctx context.Context, tx *sql.Tx, ins rowInsert, n int, args func(i int) []any) error {
	i := 0
	if n >= rowsChunk {
		st, err := d.stmts.inTx(ctx, tx, ins.chunk)
		if err != nil {
			return err
		}
		vals := make([]any, 0, rowsChunk*ins.width)
		for ; n-i >= rowsChunk; i += rowsChunk {
			vals = vals[:0]
			for j := i; j < i+rowsChunk; j++ {
				vals = append(vals, args(j)...)
			}
			if _, err := st.ExecContext(ctx, vals...); err != nil {
				return err
			}
		}
	}
	if i == n {
		return nil
	}
	st, err := d.stmts.inTx(ctx, tx, ins.one)
	if err != nil {
		return err
	}
	for ; i < n; i++ {
		if _, err := st.ExecContext(ctx, args(i)...); err != nil {
			return err
		}
	}
	return nil
}
