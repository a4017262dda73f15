package jcs

import (
	"bytes"
	"errors"
	"math/big"
	"strconv"
	"strings"
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

// TestAttack10AppendDepth: Append accepted one more level of nesting than
// Parse: 65 nested arrays (or objects) encoded without error, and the
// canonical text was refused by ParseCanonical with ErrDepth, so a record
// the signer signed with a deep body could not be read by any verifier.
// Append now refuses a container at the depth Parse refuses it.
func TestAttack10AppendDepth(t *testing.T) {
	for _, kind := range []string{"array", "object"} {
		for n := MaxDepth - 1; n <= MaxDepth+2; n++ {
			var v any = []any{}
			if kind == "object" {
				v = map[string]any{}
			}
			for range n - 1 {
				if kind == "object" {
					v = map[string]any{"a": v}
				} else {
					v = []any{v}
				}
			}
			out, err := Append(nil, v)
			if n > MaxDepth {
				if !errors.Is(err, ErrDepth) {
					t.Errorf("Append(%d nested %ss) = %.20q…, %v; want ErrDepth", n, kind, out, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("Append(%d nested %ss) = %v", n, kind, err)
				continue
			}
			if _, err := ParseCanonical(out); err != nil {
				t.Errorf("ParseCanonical(Append(%d nested %ss)) = %v", n, kind, err)
			}
		}
	}
	// Scalars at the deepest level are fine: Parse reads them.
	var v any = []any{int64(1), "x", nil}
	for range MaxDepth - 1 {
		v = []any{v}
	}
	out, err := Append(nil, v)
	if err != nil {
		t.Fatalf("Append(%d nested arrays around scalars) = %v", MaxDepth, err)
	}
	if _, err := ParseCanonical(out); err != nil {
		t.Errorf("ParseCanonical(%q…) = %v", out[:8], err)
	}
}

// TestAttack10AppendInvalidUTF8: Append copied strings that are not valid
// UTF-8 byte for byte (text no JSON parser reads as written, ParseCanonical
// refuses it) and CompareUTF16 saw two different invalid names as equal,
// so {"\xff":1,"\xfe":2} encoded in either order, by map iteration: the
// same value had two "canonical" forms. Append now refuses invalid UTF-8
// in strings and member names.
func TestAttack10AppendInvalidUTF8(t *testing.T) {
	for name, v := range map[string]any{
		"value":        "a\xffb",
		"nested value": []any{map[string]any{"k": "\xed\xa0\x80"}}, // a UTF-8-encoded surrogate
		"name":         map[string]any{"\xff": int64(1)},
		"names":        map[string]any{"\xff": int64(1), "\xfe": int64(2)},
	} {
		if out, err := Append(nil, v); !errors.Is(err, ErrUTF8) || !errors.Is(err, ErrUnsupported) {
			t.Errorf("Append(%s) = %q, %v; want ErrUnsupported and ErrUTF8", name, out, err)
		}
	}
	if out, err := Append(nil, map[string]any{"\u00e9\U0001F600": "\ufffd\u2028"}); err != nil {
		t.Errorf("Append(valid non-ASCII) = %q, %v", out, err)
	}
}

// readAsPython is the value Python's json (and encoding/json decoding
// into an integer, and custody's policy engine via json.Number.Int64)
// gives a number: an exact integer when written without '.' or exponent,
// else the nearest double.
func readAsPython(t *testing.T, s string) *big.Float {
	t.Helper()
	if !strings.ContainsAny(s, ".eE") {
		i, ok := new(big.Int).SetString(s, 10)
		if !ok {
			t.Fatalf("bad integer %q", s)
		}
		return new(big.Float).SetInt(i)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return big.NewFloat(f)
}

// TestAttack10InexactIntegers: above 2^53 a double's shortest digits are
// not its value: 2^60 is written 1152921504606847000. Parse accepted
// "1.152921504606847e18" (2^60 to every parser) with the canonical form
// 1152921504606847000, which Python, encoding/json into an int64 and
// custody's own policy engine (json.Number.Int64) read as the integer
// 1152921504606847000: the policy decided, and the log shows, a value 24
// away from the one a tool received. "100000000000000000000000" (the
// integer 10^23 to Python) became 1e+23, a double 8388608 less. A number
// is now refused (ErrNumber) when it, or its canonical form, is written as
// an integer that the double is not exactly; Append refuses such doubles
// as it refuses int64s beyond 2^53.
func TestAttack10InexactIntegers(t *testing.T) {
	refused := []string{
		"1.152921504606847e18", "1152921504606847000", "-1152921504606847000", "100000000000000000000000",
		"295147905179352830000", "123456789012345680000", "999999999999999900000", "1.2345678901234568e20",
	}
	for _, s := range refused {
		if v, err := Parse([]byte(s)); !errors.Is(err, ErrNumber) {
			t.Errorf("Parse(%s) = %v, %v; want ErrNumber", s, v, err)
		}
	}
	accepted := []string{
		"9007199254740992", "-9007199254740992", "9007199254740994", "18014398509481984", "1.8014398509481984e16",
		"1e23", "1E+23", "-1e23", "1e21", "1000000000000000000000", "100000000000000000000", "1e20", "4.5e15",
		"1e300", "1.7976931348623157e308", "0.1", "123.456",
	}
	for _, s := range accepted {
		c, err := Canonicalize([]byte(s))
		if err != nil {
			t.Errorf("Canonicalize(%s) = %v", s, err)
			continue
		}
		// Whoever reads the call and whoever reads the log agree.
		if in, out := readAsPython(t, s), readAsPython(t, string(c)); in.Cmp(out) != 0 {
			t.Errorf("Canonicalize(%s) = %s, read as %v and %v", s, c, in, out)
		}
	}
	for _, f := range []float64{1 << 60, -(1 << 60), 0x1p68} {
		if out, err := Append(nil, f); !errors.Is(err, ErrNumber) || !errors.Is(err, ErrUnsupported) {
			t.Errorf("Append(%v) = %s, %v; want ErrUnsupported and ErrNumber", f, out, err)
		}
	}
	for _, f := range []float64{1 << 53, 1 << 54, 1e20, 1e23, 1e23 + 0x1p24, 1e21, 0x1p100} {
		if out, err := Append(nil, f); err != nil {
			t.Errorf("Append(%v) = %s, %v", f, out, err)
		}
	}
}
