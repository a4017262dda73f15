package memory

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
)

// The helpers below are the parts of a memory's stored form that every
// [Store] shares, so that IDs and duplicates mean the same in each.

// ContentHash identifies a memory's content for deduplication: SHA-256
// over kind, key and text, each prefixed by its length as a big-endian
// uint64 (so no two different triples hash alike by concatenation).
func ContentHash(kind, key, text string) []byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range []string{kind, key, text} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// NewID returns a random positive int64 row ID for a memory, which says
// nothing about how many memories exist.
func NewID() (int64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	id := int64(binary.BigEndian.Uint64(b[:]) >> 1)
	if id == 0 {
		id = 1
	}
	return id, nil
}

// FormatID is a row ID as the API shows it ([Memory.ID]): 16 lowercase
// hex digits.
func FormatID(id int64) string { return fmt.Sprintf("%016x", id) }

// ParseID parses the form of [FormatID] only (any other spelling of the
// same number is not an ID) and reports whether s was one.
func ParseID(s string) (int64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	u, err := strconv.ParseUint(s, 16, 64)
	if err != nil || u == 0 || u > 1<<63-1 || FormatID(int64(u)) != s {
		return 0, false
	}
	return int64(u), true
}
