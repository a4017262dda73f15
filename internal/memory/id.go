package memory

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
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

// idEpoch is the time from which [NewID] counts milliseconds.
var idEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// The layout of an ID from [NewID]: idTop in the three bits below the
// sign, then idTimeBits of milliseconds since idEpoch, then idRandomBits
// random bits.
const (
	idTop        = 7
	idTimeBits   = 41 // milliseconds until 2089
	idRandomBits = 19
)

// NewID returns a positive int64 row ID for a memory created at t: 0b111
// in the top three bits (below the sign), the milliseconds from
// 2020-01-01 UTC to t in the next 41, and 19 random bits. So IDs sort by
// creation time to the millisecond (a store's index walks them newest
// first), and say nothing about how many memories exist.
//
// IDs made before this layout were 63 random bits; putting new ones in
// the top eighth of the range sorts them above seven in eight of those
// (and above more as time passes). Two memories created in the same
// millisecond get the same ID with probability 2^-19: a store whose
// insert finds the ID taken makes another ([RetryIDTaken]). NewID fails
// if t is before 2020 or after 2089, or if the system's random source
// does.
func NewID(t time.Time) (int64, error) {
	ms := t.Sub(idEpoch).Milliseconds()
	if t.Before(idEpoch) || ms >= 1<<idTimeBits {
		return 0, fmt.Errorf("memory id: time %s is outside 2020 to 2089 (is the clock right?)", t.UTC().Format(time.RFC3339))
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	r := int64(binary.BigEndian.Uint64(b[:]) & (1<<idRandomBits - 1))
	return idTop<<(idTimeBits+idRandomBits) | ms<<idRandomBits | r, nil
}

// ErrIDTaken is what a store's insert returns inside [RetryIDTaken]
// when the new memory's ID is already used (by any namespace).
var ErrIDTaken = errors.New("memory id already taken")

// idAttempts is how many IDs [RetryIDTaken] tries.
const idAttempts = 3

// RetryIDTaken runs remember, a whole remember transaction with a new ID
// from [NewID], again while it fails with [ErrIDTaken], up to 3 times in
// all; it returns the last result.
func RetryIDTaken(remember func() (Remembered, error)) (Remembered, error) {
	var (
		res Remembered
		err error
	)
	for range idAttempts {
		if res, err = remember(); !errors.Is(err, ErrIDTaken) {
			break
		}
	}
	return res, err
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
