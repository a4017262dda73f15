package sqlite

import (
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/signer"
)

// TestHeadCache: heads committed through this handle are served only
// while the stored size is the one its last commit left; any other size
// (another writer appended, a file put back) sends every run to the file.
func TestHeadCache(t *testing.T) {
	var c headCache
	if h, _, missing := c.lookup(0, []string{"a"}); len(h) != 0 || !slices.Equal(missing, []string{"a"}) {
		t.Fatalf("empty cache: %v %v", h, missing)
	}
	b := &signer.Batch{Leaves: []signer.Leaf{{Index: 5, Run: "a", RunSeq: 3}, {Index: 6, Run: "b", RunSeq: 0}, {Index: 7, Run: "a", RunSeq: 4}},
		Hashes: []signer.IndexedHash{{Index: tlog.StoredHashIndex(0, 7), Hash: tlog.Hash{7}}}}
	c.committed(5, map[string]int64{"a": 2}, b)
	h, last, missing := c.lookup(8, []string{"a", "b", "c"})
	if h["a"] != 4 || h["b"] != 0 || !slices.Equal(missing, []string{"c"}) || last != (tlog.Hash{7}) {
		t.Fatalf("after commit: %v %v", h, missing)
	}
	// Another writer appended one leaf: nothing cached may be trusted.
	if h, _, missing := c.lookup(9, []string{"a", "b"}); len(h) != 0 || len(missing) != 2 {
		t.Fatalf("size moved: %v %v", h, missing)
	}
	// And it stays forgotten at the old size too.
	if h, _, _ := c.lookup(8, []string{"a"}); len(h) != 0 {
		t.Fatalf("forgotten cache served %v", h)
	}
	c.committed(5, map[string]int64{"a": 2}, b)
	c.forget()
	if h, _, _ := c.lookup(8, []string{"a"}); len(h) != 0 {
		t.Fatalf("after forget: %v", h)
	}
	// A batch without its last leaf's hash is not cached.
	c.committed(5, map[string]int64{"a": 2}, &signer.Batch{Leaves: b.Leaves})
	if h, _, _ := c.lookup(8, []string{"a"}); len(h) != 0 {
		t.Fatalf("cached without the last leaf hash: %v", h)
	}
}
