package sqlite

import (
	"sync"

	"github.com/agentcustody/custody/internal/signer"
)

// maxCachedHeads bounds headCache: past it the run heads are forgotten
// (and read again from the file as batches name them).
const maxCachedHeads = 1 << 16

// headCache is what this handle's own commits left in the log: its tree
// size and the last run_seq of each run it appended to. checkExtends
// still reads the stored tree size in every transaction; when that equals
// size, no leaf was written since this handle's last commit (leaves are
// only ever appended, one index after another), so the heads of the runs
// cached here are the stored ones and only the other runs are read.
// Anything else (another writer, a failed commit, a file put back from a
// backup) drops the cache.
type headCache struct {
	mu    sync.Mutex
	size  int64 // -1: unknown
	heads map[string]int64
}

// lookup returns the cached heads of runs when the stored size is size,
// and the runs it does not hold; with another size it forgets everything
// and returns all runs.
func (c *headCache) lookup(size int64, runs []string) (map[string]int64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	heads := make(map[string]int64, len(runs))
	if c.heads == nil || c.size != size {
		c.size, c.heads = -1, nil
		return heads, runs
	}
	var missing []string
	for _, r := range runs {
		if h, ok := c.heads[r]; ok {
			heads[r] = h
		} else {
			missing = append(missing, r)
		}
	}
	return heads, missing
}

// committed records b's leaves after its commit, on a log whose size
// before b was size with heads the heads checkExtends found.
func (c *headCache) committed(size int64, heads map[string]int64, b *signer.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heads == nil || c.size != size || len(c.heads) > maxCachedHeads {
		c.heads = make(map[string]int64, len(heads))
	}
	for r, h := range heads {
		c.heads[r] = h
	}
	for i := range b.Leaves {
		c.heads[b.Leaves[i].Run] = b.Leaves[i].RunSeq
	}
	c.size = size + int64(len(b.Leaves))
}

// forget drops the cache (a commit failed: what the file holds is not
// known).
func (c *headCache) forget() {
	c.mu.Lock()
	c.size, c.heads = -1, nil
	c.mu.Unlock()
}
