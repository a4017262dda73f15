package jcs

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"testing"

	other "github.com/gowebpki/jcs"
)

// rfc8785AppendixB is RFC 8785 Appendix B, "Number Serialization Samples":
// IEEE-754 bits and the JSON text JCS writes for them. Its NaN and Infinity
// rows have no JSON text and are in TestAppendNonFinite.
var rfc8785AppendixB = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},                         // zero
	{0x8000000000000000, "0"},                         // minus zero
	{0x0000000000000001, "5e-324"},                    // min pos number
	{0x8000000000000001, "-5e-324"},                   // min neg number
	{0x7fefffffffffffff, "1.7976931348623157e+308"},   // max pos number
	{0xffefffffffffffff, "-1.7976931348623157e+308"},  // max neg number
	{0x4340000000000000, "9007199254740992"},          // max pos int
	{0xc340000000000000, "-9007199254740992"},         // max neg int
	{0x4430000000000000, "295147905179352830000"},     // ~2**68
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},     //
	{0x44b52d02c7e14af6, "1e+23"},                     //
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},    //
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},     //
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},     //
	{0x444b1ae4d6e2ef50, "1e+21"},                     //
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},      //
	{0x3eb0c6f7a0b5ed8d, "0.000001"},                  //
	{0x41b3de4355555553, "333333333.3333332"},         //
	{0x41b3de4355555554, "333333333.33333325"},        //
	{0x41b3de4355555555, "333333333.3333333"},         //
	{0x41b3de4355555556, "333333333.3333334"},         //
	{0x41b3de4355555557, "333333333.33333343"},        //
	{0xbecbf647612f3696, "-0.0000033333333333333333"}, //
	{0x43143ff3c1cb0959, "1424953923781206.2"},        // round to even
}

// appendixBInexact are the Appendix B rows written as integers that their
// doubles are not exactly (2^68 is 295147905179352825856): Append and
// Parse refuse them (ErrNumber), see TestAttack10InexactIntegers.
var appendixBInexact = map[uint64]bool{0x4430000000000000: true, 0x444b1ae4d6e2ef4e: true, 0x444b1ae4d6e2ef4f: true}

func TestAppendixBNumbers(t *testing.T) {
	for _, tt := range rfc8785AppendixB {
		f := math.Float64frombits(tt.bits)
		if got := appendFloat(nil, f); string(got) != tt.want {
			t.Errorf("appendFloat(%016x) = %q, want %q", tt.bits, got, tt.want)
		}
		if appendixBInexact[tt.bits] {
			if got, err := Append(nil, f); !errors.Is(err, ErrNumber) {
				t.Errorf("Append(%016x) = %q, %v; want ErrNumber", tt.bits, got, err)
			}
			if v, err := Parse([]byte(tt.want)); !errors.Is(err, ErrNumber) {
				t.Errorf("Parse(%s) = %v, %v; want ErrNumber", tt.want, v, err)
			}
			continue
		}
		got, err := Append(nil, f)
		if err != nil || string(got) != tt.want {
			t.Errorf("Append(%016x) = %q, %v; want %q", tt.bits, got, err, tt.want)
			continue
		}
		// The text parses back to the same double (minus zero aside, which
		// JCS writes as 0 and which a written "-0" may not spell).
		v, err := Parse(got)
		if err != nil {
			t.Errorf("Parse(%q) = %v", got, err)
			continue
		}
		if back := number(v); back != f && f != 0 {
			t.Errorf("Parse(%q) = %v, want %016x", got, v, tt.bits)
		}
		if _, err := ParseCanonical(got); err != nil {
			t.Errorf("ParseCanonical(%q) = %v", got, err)
		}
	}
}

func TestAppendNonFinite(t *testing.T) {
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		if got, err := Append(nil, math.Float64frombits(bits)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Append(%016x) = %q, %v; want ErrUnsupported", bits, got, err)
		}
	}
}

// TestSection3223 is RFC 8785 section 3.2.2.3's number example. Its first
// number, 333333333.33333329, has more digits than a double keeps: JCS
// writes it 333333333.3333333, a different decimal, which custody refuses
// (ErrNumber) so that two argument texts never share one commitment.
func TestSection3223(t *testing.T) {
	got, err := Canonicalize([]byte(`[1E30, 4.50, 2e-3, 0.000000000000000000000000001]`))
	if want := `[1e+30,4.5,0.002,1e-27]`; err != nil || string(got) != want {
		t.Errorf("Canonicalize = %q, %v; want %q", got, err, want)
	}
	if got, err := Canonicalize([]byte(`333333333.33333329`)); !errors.Is(err, ErrNumber) {
		t.Errorf("Canonicalize(333333333.33333329) = %q, %v; want ErrNumber", got, err)
	}
	if ref, err := other.Transform([]byte(`333333333.33333329`)); err != nil || string(ref) != "333333333.3333333" {
		t.Errorf("reference Transform(333333333.33333329) = %q, %v", ref, err)
	}
}

// TestParsedNumberTypes: integers within ±(2^53-1) parse as int64 however
// they are written; other numbers as float64.
func TestParsedNumberTypes(t *testing.T) {
	for in, want := range map[string]any{
		`7`: int64(7), `7.0`: int64(7), `7e0`: int64(7), `-9007199254740991`: int64(-MaxSafeInteger),
		`9007199254740992`: float64(1 << 53), `1.5`: 1.5, `1e21`: 1e21, `-5e-324`: -5e-324,
	} {
		if got, err := Parse([]byte(in)); err != nil || got != want {
			t.Errorf("Parse(%s) = %#v, %v; want %#v", in, got, err, want)
		}
	}
}

func number(v any) float64 {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return math.NaN()
}

// FuzzNumber compares the number serialization with an independent RFC
// 8785 implementation's (github.com/gowebpki/jcs) on arbitrary doubles, and
// checks that the text parses back to the same double.
func FuzzNumber(f *testing.F) {
	for _, tt := range rfc8785AppendixB {
		f.Add(tt.bits)
	}
	for _, x := range []float64{0.1, 1e-7, 1e21, 1e20, 123456789.125, -1.5, 1 << 53, 5e-324, math.MaxFloat64} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		got, err := Append(nil, x)
		want, refErr := other.NumberToJSON(x)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			if err == nil || refErr == nil {
				t.Fatalf("Append(%016x) = %q, %v; reference %q, %v; want both to fail", bits, got, err, want, refErr)
			}
			return
		}
		if errors.Is(err, ErrNumber) {
			// An integer the double is not exactly (see
			// TestAttack10InexactIntegers): the formatting still agrees.
			if f := appendFloat(nil, x); refErr != nil || string(f) != want || math.Abs(x) <= MaxSafeInteger {
				t.Fatalf("Append(%016x) = %v; appendFloat %q, reference %q, %v", bits, err, f, want, refErr)
			}
			return
		}
		if err != nil || refErr != nil || string(got) != want {
			t.Fatalf("Append(%016x) = %q, %v; reference %q, %v", bits, got, err, want, refErr)
		}
		back, err := strconv.ParseFloat(string(got), 64)
		if err != nil || back != x && x != 0 {
			t.Fatalf("Append(%016x) = %q, which parses as %v, %v", bits, got, back, err)
		}
		v, err := ParseCanonical(got)
		if err != nil || number(v) != x && x != 0 {
			t.Fatalf("ParseCanonical(%q) = %v, %v; want %v", got, v, err, x)
		}
	})
}

// FuzzDifferential canonicalizes arbitrary input with both this package
// and github.com/gowebpki/jcs. Where this package accepts the input, the
// reference must too and produce the same bytes. This package is stricter
// in places (duplicate names, lone surrogates, depth, numbers a double
// cannot hold exactly, "-0"), so its refusals are not compared.
func FuzzDifferential(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1.0,"é",1e21]}`, `[1E30,4.50,2e-3,0.000000000000000000000000001]`,
		`{"\u20ac":1,"\r":2,"\ud83d\ude00":3.5,"\ufb33":-0.25}`, `[0.1,0.2,0.30000000000000004]`,
		`{"n":9007199254740992,"m":-9007199254740991,"s":"\u001f\"\\"}`, `[5e-324,1.7976931348623157e308]`,
		`[1e-7,1e-6,999999999999999900000,1e21]`, `[true,false,null,{},[]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Canonicalize(b)
		if err != nil {
			return
		}
		want, refErr := other.Transform(b)
		if refErr != nil {
			t.Fatalf("Canonicalize(%q) = %q; reference refuses: %v", b, got, refErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Canonicalize(%q) = %q; reference %q", b, got, want)
		}
	})
}
