package witness

import (
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestCheckSwap(t *testing.T) {
	r1, r2 := tlog.Hash{1}, tlog.Hash{2}
	for _, c := range []struct {
		name                  string
		size                  int64
		root                  tlog.Hash
		old, new              int64
		newRoot               tlog.Hash
		write, conflict, fork bool
		conflictSize          int64
	}{
		{name: "first tree", old: 0, new: 5, newRoot: r1, write: true},
		{name: "grows", size: 5, root: r1, old: 5, new: 9, newRoot: r2, write: true},
		{name: "same tree again", size: 5, root: r1, old: 5, new: 5, newRoot: r1},
		{name: "fork at the same size", size: 5, root: r1, old: 5, new: 5, newRoot: r2, fork: true},
		{name: "stale old size", size: 9, root: r2, old: 5, new: 12, newRoot: r1, conflict: true, conflictSize: 9},
		{name: "old size ahead", size: 5, root: r1, old: 7, new: 9, newRoot: r2, conflict: true, conflictSize: 5},
		{name: "none stored, old size claimed", old: 3, new: 5, newRoot: r1, conflict: true, conflictSize: 0},
	} {
		write, err := CheckSwap(c.size, c.root, c.old, c.new, c.newRoot)
		var ce *ConflictError
		switch {
		case c.conflict:
			if !errors.As(err, &ce) || ce.Size != c.conflictSize || write {
				t.Errorf("%s: %v %v, want a conflict with size %d", c.name, write, err, c.conflictSize)
			}
		case c.fork:
			if !errors.Is(err, ErrFork) || write {
				t.Errorf("%s: %v %v, want ErrFork", c.name, write, err)
			}
		default:
			if err != nil || write != c.write {
				t.Errorf("%s: %v %v, want write=%v", c.name, write, err, c.write)
			}
		}
	}
}
