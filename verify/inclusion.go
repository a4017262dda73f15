package verify

import (
	"math/bits"

	"golang.org/x/mod/sumdb/tlog"
)

// maxProof is the length of the longest RFC 6962 Merkle audit path: a tree
// of 2^63 leaves has 63 levels.
const maxProof = 63

// An inclusionChecker checks RFC 6962 inclusion proofs (Merkle audit paths,
// tlog.RecordProof) against one tree head, the bundle's checkpoint, for the
// records one verifier worker reads in turn. It accepts exactly the proofs
// that tlog.CheckRecord(proof, size, root, index, leafHash) accepts, but
// hashes less: the records of a run sit at neighbouring leaves, so their
// audit paths share everything above the subtree that holds both leaves.
//
// The checker remembers the last proof it accepted together with the hash
// that proof implies for every node on its path. A new proof is folded from
// its leaf up to the deepest node A that lies on both paths. If it implies
// the same hash for A as the remembered proof, and its hashes for the levels
// above A are the remembered proof's hashes for the same nodes, then
// tlog.CheckRecord would go on to repeat, from A up, the computation that
// already ended at the root, so the proof is accepted. Otherwise the rest of
// the path is hashed as tlog.CheckRecord does and compared with the root.
// Either way every hash of the new proof is used, and a proof that differs
// in any hash, in length, in the leaf or in the index is judged as
// tlog.CheckRecord judges it.
//
// For consecutive leaves this costs about two node hashes per proof (one
// for half the leaves, two for a quarter, …) and a comparison of the upper
// hashes, instead of ⌈log₂ size⌉ node hashes. An inclusionChecker is not safe
// for concurrent use.
type inclusionChecker struct {
	size int64     // tree size of the checkpoint
	root tlog.Hash // root hash of the checkpoint

	// The last accepted proof, valid when ok.
	ok    bool
	index int64                   // its leaf index
	sib   [maxProof]tlog.Hash     // sib[j]: its hash for the sibling of the depth j+1 node
	nodes [maxProof + 1]tlog.Hash // nodes[j]: the hash it implies for the depth j node; nodes[0] == root
}

// check reports whether tlog.CheckRecord(p, c.size, c.root, index, leaf)
// would return nil. Depth j counts from the root (depth 0, the whole tree
// [0, size)) to the leaf (depth len(p)); p[len(p)-1-j] is the hash of the
// sibling of the depth j+1 node, as in tlog.RecordProof.
func (c *inclusionChecker) check(p tlog.RecordProof, index int64, leaf tlog.Hash) bool {
	if index < 0 || index >= c.size {
		return false
	}
	// Walk down the path as tlog's runRecordProof does: [lo, hi) splits at
	// the largest power of two below its width. shared is the number of
	// splits the remembered leaf takes the same way.
	var left [maxProof]bool // left[j]: the depth j+1 node is its parent's left child
	depth, shared := 0, -1
	for lo, hi := int64(0), c.size; hi-lo > 1; depth++ {
		mid := lo + int64(1)<<(bits.Len64(uint64(hi-lo-1))-1)
		left[depth] = index < mid
		if shared < 0 && (!c.ok || left[depth] != (c.index < mid)) {
			shared = depth
		}
		if left[depth] {
			hi = mid
		} else {
			lo = mid
		}
	}
	if shared < 0 {
		shared = depth // the same leaf again
	}
	if len(p) != depth {
		return false
	}
	var nodes [maxProof + 1]tlog.Hash
	nodes[depth] = leaf
	fold(&nodes, p, &left, depth, shared)
	from := shared
	same := c.ok && nodes[shared] == c.nodes[shared]
	for j := 0; same && j < shared; j++ {
		same = p[depth-1-j] == c.sib[j]
	}
	if !same {
		fold(&nodes, p, &left, shared, 0)
		if nodes[0] != c.root {
			return false
		}
		from = 0
	}
	// Nodes and siblings above depth from are already remembered.
	c.ok = false
	copy(c.nodes[from:depth+1], nodes[from:depth+1])
	for j := from; j < depth; j++ {
		c.sib[j] = p[depth-1-j]
	}
	c.ok, c.index = true, index
	return true
}

// fold sets nodes[j] for j from hi-1 down to lo from nodes[j+1] and its
// sibling's hash in p, as tlog's runRecordProof combines them.
func fold(nodes *[maxProof + 1]tlog.Hash, p tlog.RecordProof, left *[maxProof]bool, hi, lo int) {
	depth := len(p)
	for j := hi - 1; j >= lo; j-- {
		if s := p[depth-1-j]; left[j] {
			nodes[j] = tlog.NodeHash(nodes[j+1], s)
		} else {
			nodes[j] = tlog.NodeHash(s, nodes[j+1])
		}
	}
}
