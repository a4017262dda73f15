package verify

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// testTree is an RFC 6962 tree built with tlog, with leaf hashes derived
// from seed and the leaf number.
type testTree struct {
	tb     testing.TB
	leaves []tlog.Hash
	hashes []tlog.Hash // tlog stored hashes
}

func newTestTree(tb testing.TB, size int, seed byte) *testTree {
	t := &testTree{tb: tb}
	for i := range size {
		var b [9]byte
		b[0] = seed
		binary.BigEndian.PutUint64(b[1:], uint64(i))
		hs, err := tlog.StoredHashesForRecordHash(int64(i), tlog.RecordHash(b[:]), t)
		if err != nil {
			tb.Fatal(err)
		}
		t.leaves = append(t.leaves, tlog.RecordHash(b[:]))
		t.hashes = append(t.hashes, hs...)
	}
	return t
}

func (t *testTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = t.hashes[x]
	}
	return out, nil
}

func (t *testTree) root() tlog.Hash {
	h, err := tlog.TreeHash(int64(len(t.leaves)), t)
	if err != nil {
		t.tb.Fatal(err)
	}
	return h
}

func (t *testTree) proof(i int64) tlog.RecordProof {
	p, err := tlog.ProveRecord(int64(len(t.leaves)), i, t)
	if err != nil {
		t.tb.Fatal(err)
	}
	return p
}

// checkAgrees runs c.check and tlog.CheckRecord on the same proof and fails
// if they disagree or if the verdict is not want.
func checkAgrees(t *testing.T, c *inclusionChecker, p tlog.RecordProof, i int64, leaf tlog.Hash, want bool) {
	t.Helper()
	tl := tlog.CheckRecord(p, c.size, c.root, i, leaf) == nil
	if got := c.check(p, i, leaf); got != tl || got != want {
		t.Fatalf("check(proof of %d hashes, %d) = %v, tlog.CheckRecord accepts: %v, want %v", len(p), i, got, tl, want)
	}
}

func TestInclusionChecker(t *testing.T) {
	const size = 300
	tr := newTestTree(t, size, 0)
	other := newTestTree(t, size, 1) // a different tree of the same size
	root := tr.root()
	tests := []struct {
		name string
		run  func(t *testing.T, c *inclusionChecker)
	}{
		{"every leaf in order", func(t *testing.T, c *inclusionChecker) {
			for i := range int64(size) {
				checkAgrees(t, c, tr.proof(i), i, tr.leaves[i], true)
			}
		}},
		{"every leaf in reverse order", func(t *testing.T, c *inclusionChecker) {
			for i := int64(size - 1); i >= 0; i-- {
				checkAgrees(t, c, tr.proof(i), i, tr.leaves[i], true)
			}
		}},
		{"same leaf twice", func(t *testing.T, c *inclusionChecker) {
			checkAgrees(t, c, tr.proof(7), 7, tr.leaves[7], true)
			checkAgrees(t, c, tr.proof(7), 7, tr.leaves[7], true)
		}},
		{"wrong hash anywhere in a proof sharing the remembered path", func(t *testing.T, c *inclusionChecker) {
			for _, i := range []int64{1, 2, 100, 128, 255, 256, 257, size - 1} {
				for k := range tr.proof(i) {
					checkAgrees(t, c, tr.proof(i-1), i-1, tr.leaves[i-1], true)
					p := tr.proof(i)
					p[k][31] ^= 1
					checkAgrees(t, c, p, i, tr.leaves[i], false)
					// A refused proof is not remembered.
					checkAgrees(t, c, tr.proof(i), i, tr.leaves[i], true)
					// The same wrong hash for the same leaf again.
					checkAgrees(t, c, p, i, tr.leaves[i], false)
				}
			}
		}},
		{"wrong leaf hash", func(t *testing.T, c *inclusionChecker) {
			checkAgrees(t, c, tr.proof(40), 40, tr.leaves[40], true)
			checkAgrees(t, c, tr.proof(41), 41, tr.leaves[40], false)
			checkAgrees(t, c, tr.proof(40), 40, tr.leaves[41], false)
		}},
		{"leaf and proof from a different tree", func(t *testing.T, c *inclusionChecker) {
			for _, i := range []int64{0, 1, 63, 64, 299} {
				checkAgrees(t, c, tr.proof(i), i, tr.leaves[i], true)
				checkAgrees(t, c, other.proof(i), i, other.leaves[i], false)
				checkAgrees(t, c, other.proof(i), i, tr.leaves[i], false)
				checkAgrees(t, c, tr.proof(i), i, other.leaves[i], false)
			}
		}},
		{"index off by one", func(t *testing.T, c *inclusionChecker) {
			for _, i := range []int64{1, 2, 63, 64, 65, 255, 256, 298} {
				checkAgrees(t, c, tr.proof(i-1), i-1, tr.leaves[i-1], true)
				checkAgrees(t, c, tr.proof(i), i+1, tr.leaves[i], false)
				checkAgrees(t, c, tr.proof(i), i-1, tr.leaves[i], false)
				checkAgrees(t, c, tr.proof(i), i, tr.leaves[i], true)
			}
			checkAgrees(t, c, tr.proof(size-1), size, tr.leaves[size-1], false)
			checkAgrees(t, c, tr.proof(0), -1, tr.leaves[0], false)
		}},
		{"proof too long or too short", func(t *testing.T, c *inclusionChecker) {
			checkAgrees(t, c, tr.proof(10), 10, tr.leaves[10], true)
			p := tr.proof(11)
			checkAgrees(t, c, p[:len(p)-1], 11, tr.leaves[11], false)
			checkAgrees(t, c, p[1:], 11, tr.leaves[11], false)
			checkAgrees(t, c, append(slices.Clone(p), p[0]), 11, tr.leaves[11], false)
			checkAgrees(t, c, append(tlog.RecordProof{tr.leaves[10]}, p...), 11, tr.leaves[11], false)
			checkAgrees(t, c, nil, 11, tr.leaves[11], false)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, &inclusionChecker{size: size, root: root})
		})
	}
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33} {
		t.Run(fmt.Sprintf("tree of %d", n), func(t *testing.T) {
			tr := newTestTree(t, n, 2)
			c := &inclusionChecker{size: int64(n), root: tr.root()}
			for i := range int64(n) {
				checkAgrees(t, c, tr.proof(i), i, tr.leaves[i], true)
			}
			for i := range int64(n) {
				checkAgrees(t, c, tr.proof(i), int64(n)-1-i, tr.leaves[i], i == int64(n)-1-i)
			}
		})
	}
}

// FuzzInclusionAgrees is the differential check of inclusionChecker against
// tlog.CheckRecord: on a sequence of proofs, genuine or altered (a hash
// changed, dropped or added, another leaf, another index, another tree's
// proof), each verdict is tlog.CheckRecord's.
func FuzzInclusionAgrees(f *testing.F) {
	f.Add(uint16(300), []byte{0, 10, 0, 0, 0, 11, 0, 0, 0, 12, 1, 5, 0, 12, 0, 0})
	f.Add(uint16(1), []byte{0, 0, 0, 0, 0, 0, 3, 0})
	f.Add(uint16(64), []byte{0, 63, 0, 0, 0, 62, 4, 0, 0, 62, 0, 0, 0, 31, 5, 0})
	f.Add(uint16(257), []byte{1, 0, 0, 0, 0, 255, 6, 0, 0, 255, 0, 0, 1, 0, 2, 1, 1, 0, 7, 0})
	f.Fuzz(func(t *testing.T, size uint16, ops []byte) {
		n := int64(size%600) + 1
		tr := newTestTree(t, int(n), 0)
		other := newTestTree(t, int(n), 1)
		c := &inclusionChecker{size: n, root: tr.root()}
		for ; len(ops) >= 4; ops = ops[4:] {
			i := int64(binary.BigEndian.Uint16(ops)) % n
			p, leaf := tr.proof(i), tr.leaves[i]
			k := int(ops[3])
			switch ops[2] % 8 {
			case 1: // one hash changed
				if len(p) > 0 {
					p[k%len(p)][k%32] ^= 1 << (k % 8)
				}
			case 2: // another index
				i += int64(k%5) - 2
			case 3: // a hash dropped
				if len(p) > 0 {
					p = slices.Delete(p, k%len(p), k%len(p)+1)
				}
			case 4: // a hash added
				p = slices.Insert(p, k%(len(p)+1), tr.leaves[int64(k)%n])
			case 5: // another leaf
				leaf = tr.leaves[int64(k)%n]
			case 6: // the other tree's proof
				p = other.proof(i)
			case 7: // the other tree's leaf and proof
				p, leaf = other.proof(i), other.leaves[i]
			}
			want := tlog.CheckRecord(p, n, c.root, i, leaf) == nil
			if got := c.check(p, i, leaf); got != want {
				t.Fatalf("tree of %d: check(op %d, leaf %d) = %v, tlog.CheckRecord accepts: %v", n, ops[2]%8, i, got, want)
			}
		}
	})
}
