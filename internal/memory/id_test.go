package memory

import (
	"bytes"
	"testing"
	"time"
)

func TestContentHashSeparatesFields(t *testing.T) {
	if bytes.Equal(ContentHash("fact", "ab", "c"), ContentHash("fact", "a", "bc")) {
		t.Fatal("key/text boundary not in the hash: (ab, c) and (a, bc) collide")
	}
	if !bytes.Equal(ContentHash("fact", "k", "t"), ContentHash("fact", "k", "t")) {
		t.Fatal("ContentHash is not deterministic")
	}
}

func TestIDForms(t *testing.T) {
	for i := 0; i < 100; i++ {
		id, err := NewID(time.Now())
		if err != nil || id <= 0 {
			t.Fatalf("NewID = %d, %v", id, err)
		}
		s := FormatID(id)
		if got, ok := ParseID(s); !ok || got != id || len(s) != 16 {
			t.Fatalf("ParseID(FormatID(%d)=%q) = %d, %v", id, s, got, ok)
		}
	}
	for _, s := range []string{"", "0000000000000000", "000000000000000A", "8000000000000000", "00000000000000001", "+000000000000001", "zzzzzzzzzzzzzzzz"} {
		if _, ok := ParseID(s); ok {
			t.Errorf("ParseID(%q) accepted", s)
		}
	}
}

// TestIDOrder: IDs of later milliseconds sort after earlier ones whatever
// their random bits, above seven in eight of the old wholly random IDs
// (all those below 7<<60); times outside 2020 to 2089 are an error.
func TestIDOrder(t *testing.T) {
	base := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	prev := int64(0)
	for i := range 200 {
		id, err := NewID(base.Add(time.Duration(i) * time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev || id < 7<<60 {
			t.Fatalf("NewID at +%d ms = %x, not after %x and in the top eighth", i, id, prev)
		}
		prev = id
	}
	seen := map[int64]bool{}
	for range 50 {
		id, err := NewID(base)
		if err != nil {
			t.Fatal(err)
		}
		seen[id] = true
	}
	if len(seen) < 45 {
		t.Errorf("50 IDs in one millisecond gave only %d distinct: the low bits are not random", len(seen))
	}
	if id, err := NewID(idEpoch); err != nil || id < 7<<60 || id >= 7<<60+1<<idRandomBits {
		t.Errorf("NewID(epoch) = %x, %v; want an ID in the first millisecond", id, err)
	}
	last := idEpoch.Add((1<<idTimeBits - 1) * time.Millisecond)
	if id, err := NewID(last); err != nil || id <= 0 {
		t.Errorf("NewID(%s) = %x, %v; want a positive ID", last, id, err)
	}
	for _, at := range []time.Time{{}, time.Unix(0, 0), idEpoch.Add(-time.Millisecond), last.Add(time.Millisecond), time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if id, err := NewID(at); err == nil {
			t.Errorf("NewID(%s) = %x, want an error", at, id)
		}
	}
}
