package memory

import (
	"bytes"
	"testing"
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
		id, err := NewID()
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
