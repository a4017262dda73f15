package sqlite

import (
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/signer"
)

// maxCachedHeads bounds headCache: past it the run heads are forgotten
// (and read again from the file as batches name them).
const maxCachedHeads = 1 << 16

// headCache is what this handle's own commits left in the log: its tree
// size, the leaf hash of its last leaf and the last run_seq of each run
// it appended to. checkExtends still reads the stored tree size in every
// transaction; when that equals size and the stored hash of the last
// leaf is last, the log is the one this handle's last commit left (leaves
// are only ever appended, one index after another; a log of the same
// size that is another one, such as a backup put back and grown again
// by another writer, ends in another leaf), so the heads of the runs
// cached here are the stored ones and only the other runs are read.
// Anything else (another writer, a failed commit, a file put back from a
// backup) drops the cache.
type headCache struct {
	mu    sync.Mutex
	size  int64     // -1: unknown
	last  tlog.Hash // leaf hash of leaf size-1
	heads map[string]int64
}

// lookup returns the cached heads of runs when the stored size is size,
// the leaf hash the cache expects at size-1 (to be checked against the
// file before the heads are trusted), and the runs it does not hold; with
// another size it forgets everything and returns all runs.
func (c *headCache) lookup(size int64, runs []string) (map[string]int64, tlog.Hash, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	heads := make(map[string]int64, len(runs))
	if c.heads == nil || c.size != size {
		c.size, c.heads = -1, nil
		return heads, tlog.Hash{}, runs
	}
	var missing []string
	for _, r := range runs {
		if h, ok := c.heads[r]; ok {
			heads[r] = h
		} else {
			missing = append(missing, r)
		}
	}
	return heads, c.last, missing
}

// committed records b's leaves after its commit, on a log whose size
// before b was size with heads the heads checkExtends found. A batch
// without its last leaf's hash is not cached.
func (c *headCache) committed(size int64, heads map[string]int64, b *signer.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(b.Leaves)
	if n == 0 {
		return
	}
	want := tlog.StoredHashIndex(0, b.Leaves[n-1].Index)
	var last tlog.Hash
	found := false
	for i := len(b.Hashes) - 1; i >= 0; i-- {
		if b.Hashes[i].Index == want {
			last, found = b.Hashes[i].Hash, true
			break
		}
	}
	if !found {
		c.size, c.heads = -1, nil
		return
	}
	if c.heads == nil || c.size != size || len(c.heads) > maxCachedHeads {
		c.heads = make(map[string]int64, len(heads))
	}
	for r, h := range heads {
		c.heads[r] = h
	}
	for i := range b.Leaves {
		c.heads[b.Leaves[i].Run] = b.Leaves[i].RunSeq
	}
	c.size = size + int64(n)
	c.last = last
}

// forget drops the cache (a commit failed: what the file holds is not
// known).
func (c *headCache) forget() {
	c.mu.Lock()
	c.size, c.heads = -1, nil
	c.mu.Unlock()
}
