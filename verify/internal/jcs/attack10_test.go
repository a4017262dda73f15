package jcs

import (
	"bytes"
	"errors"
	"testing"
)

// TestAttack10CanonicalEscapeCost: a string of non-canonical escapes
// ("\/" repeated) given to the canonical parser, as a hostile bundle's
// record is by the verifier, cost one heap-allocated deferred check per
// escape (512Ki allocations, 38 MB and 18 times the time of Parse for a
// 1 MiB record) and reported the last escape. The first non-canonical
// escape is now remembered by its offset: no allocation per escape, and
// the error names the first one.
func TestAttack10CanonicalEscapeCost(t *testing.T) {
	b := append([]byte(`"`), bytes.Repeat([]byte(`\/`), 1<<16)...)
	b = append(b, '"')
	for name, parse := range map[string]func() error{
		"ParseCanonical": func() error { _, err := ParseCanonical(b); return err },
		"ValidateCanonicalPrefix": func() error {
			_, err := ValidateCanonicalPrefix(b, 1)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := parse()
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrNotCanonical) || e.Offset != 1 {
				t.Fatalf("%s(%d escapes) = %v, want ErrNotCanonical at offset 1", name, 1<<16, err)
			}
			// The string's buffer (grown by append) is the only allocation
			// that grows with the input.
			if n := testing.AllocsPerRun(5, func() { parse() }); n > 64 {
				t.Errorf("%s(%d escapes): %v allocations, want at most 64", name, 1<<16, n)
			}
		})
	}
	// A malformed escape after a non-canonical one is still reported as
	// what it is.
	if _, err := ParseCanonical([]byte(`"\/\ud800"`)); !errors.Is(err, ErrSurrogate) {
		t.Errorf(`ParseCanonical("\/\ud800") = %v, want ErrSurrogate`, err)
	}
	if _, err := ParseCanonical([]byte(`"\/`)); !errors.Is(err, ErrSyntax) {
		t.Errorf(`ParseCanonical("\/) = %v, want ErrSyntax`, err)
	}
}
