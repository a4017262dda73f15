package jcs

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unsafe"
)

// number reads a number without allocating: an integer within
// ±MaxSafeInteger as i, anything else as f with isFloat set.
func (p *parser) number() (i int64, f float64, isFloat bool, err error) {
	start := p.i
	neg := p.b[p.i] == '-'
	if neg {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 {
		return 0, 0, false, p.err(ErrSyntax, "invalid number")
	}
	if n > 1 && p.b[digits] == '0' {
		return 0, 0, false, &Error{Offset: start, Err: ErrSyntax, Detail: "leading zero"}
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return p.float(start)
	}
	if neg && n == 1 && p.b[digits] == '0' {
		return 0, 0, false, &Error{Offset: start, Err: ErrNumber, Detail: "minus zero"}
	}
	// MaxSafeInteger has 16 digits; 16 digits cannot overflow int64.
	var v int64
	if n <= 16 {
		for _, c := range p.b[digits:p.i] {
			v = v*10 + int64(c-'0')
		}
	}
	if n > 16 || v > MaxSafeInteger {
		p.i = start
		return p.float(start)
	}
	if neg {
		v = -v
	}
	return v, 0, false, nil
}

// float reads the number at start (its sign and integer part valid) as a
// double: it must keep its exact decimal value in canonical form, and in
// canonical mode be written in it.
func (p *parser) float(start int) (int64, float64, bool, error) {
	p.i = start
	if p.b[p.i] == '-' {
		p.i++
	}
	p.digits()
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return 0, 0, false, p.err(ErrSyntax, "invalid number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return 0, 0, false, p.err(ErrSyntax, "invalid number")
		}
	}
	text := p.b[start:p.i]
	// The text matched JSON's number grammar, which ParseFloat accepts and
	// rounds as ECMAScript does (to nearest, ties to even). Overflow is an
	// error; underflow to zero is caught by the value check below.
	f, err := strconv.ParseFloat(unsafe.String(&text[0], len(text)), 64)
	if err != nil {
		return 0, 0, false, &Error{Offset: start, Err: ErrNumber, Detail: "out of range"}
	}
	if f == 0 && text[0] == '-' {
		return 0, 0, false, &Error{Offset: start, Err: ErrNumber, Detail: "minus zero"}
	}
	var buf [32]byte
	canon := appendFloat(buf[:0], f)
	if !sameDecimal(text, canon) {
		return 0, 0, false, &Error{Offset: start, Err: ErrNumber, Detail: "more precision than a double: " + clip(text)}
	}
	if inexactInteger(f, text, canon) {
		return 0, 0, false, &Error{Offset: start, Err: ErrNumber, Detail: "integer a double holds only approximately: " + clip(text)}
	}
	if p.canon && !bytes.Equal(text, canon) {
		return 0, 0, false, &Error{Offset: start, Err: ErrNotCanonical, Detail: "number"}
	}
	if f == math.Trunc(f) && math.Abs(f) <= MaxSafeInteger {
		return int64(f), 0, false, nil
	}
	return 0, f, true, nil
}

// inexactInteger reports whether f, a double beyond ±MaxSafeInteger
// (always an integer), is written in text or in canon (its canonical form)
// as an integer other than f's exact value. Above 2^53 the shortest digits
// that round-trip are not the value (2^60 is 1152921504606847000), and a
// number written as an integer is read exactly by Python's json, by
// encoding/json into an integer and by json.Number.Int64, but as the double
// by JavaScript: the readers would disagree on the value.
func inexactInteger(f float64, text, canon []byte) bool {
	if math.Abs(f) <= MaxSafeInteger || !isInteger(text) && !isInteger(canon) {
		return false
	}
	if canon[0] == '-' {
		f, canon = -f, canon[1:]
	}
	var buf [330]byte // the longest double, 1.7976931348623157e308, has 309 digits
	var exact []byte
	if f < 1<<64 {
		exact = strconv.AppendUint(buf[:0], uint64(f), 10) // cheaper than 'f'
	} else {
		exact = strconv.AppendFloat(buf[:0], f, 'f', 0, 64)
	}
	return !sameDecimal(exact, canon)
}

// isInteger reports whether the JSON number text has neither fraction nor
// exponent.
func isInteger(text []byte) bool {
	return bytes.IndexAny(text, ".eE") < 0
}

// digits skips decimal digits and returns how many.
func (p *parser) digits() int {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// clip shortens a number's text for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// A decimal is a JSON number's exact value: 0.digits × 10^exp, without
// leading or trailing zeros in digits; zero has no digits and no sign.
type decimal struct {
	neg    bool
	digits [20]byte
	n      int // len(digits) used; -1 if the number has more significant digits
	exp    int
}

// parseDecimal reads JSON number text (already checked against the
// grammar). Exponents saturate far beyond a double's range.
func parseDecimal(s []byte) decimal {
	var d decimal
	i := 0
	if s[0] == '-' {
		d.neg = true
		i++
	}
	intDigits, leading, sig, sawPoint, started := 0, 0, 0, false, false
	for ; i < len(s) && s[i] != 'e' && s[i] != 'E'; i++ {
		c := s[i]
		if c == '.' {
			sawPoint = true
			continue
		}
		if !sawPoint {
			intDigits++
		}
		if !started {
			if c == '0' {
				leading++
				continue
			}
			started = true
		}
		sig++ // digits from the first non-zero one, trailing zeros included
		if c != '0' {
			if sig > len(d.digits) {
				d.n = -1
			} else if d.n >= 0 {
				// Fill zeros between the last stored digit and this one.
				for d.n < sig-1 {
					d.digits[d.n] = '0'
					d.n++
				}
				d.digits[d.n] = c
				d.n++
			}
		}
	}
	if !started {
		return decimal{}
	}
	e := 0
	if i < len(s) {
		i++ // e
		eneg := false
		if s[i] == '+' || s[i] == '-' {
			eneg = s[i] == '-'
			i++
		}
		for ; i < len(s); i++ {
			if e < 1<<30 {
				e = e*10 + int(s[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
	}
	d.exp = intDigits - leading + e
	return d
}

// sameDecimal reports whether JSON number texts a and b have the same value.
func sameDecimal(a, b []byte) bool {
	x, y := parseDecimal(a), parseDecimal(b)
	return x.n >= 0 && x.n == y.n && x.neg == y.neg && x.exp == y.exp && x.digits == y.digits
}

// appendNumber is appendFloat for Append: it refuses (ErrUnsupported,
// ErrNumber) the doubles Parse refuses as written in canonical form.
func appendNumber(dst []byte, f float64) ([]byte, error) {
	n := len(dst)
	dst = appendFloat(dst, f)
	if inexactInteger(f, dst[n:], dst[n:]) {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, dst[n:], ErrNumber)
	}
	return dst, nil
}

// appendFloat appends f as ECMAScript's Number.prototype.toString writes it
// (RFC 8785 section 3.2.2.3); f must be finite. strconv's shortest
// round-trip digits are the digits ECMAScript chooses; only the layout
// differs: plain decimal for 1e-6 <= |f| < 1e21, else exponent form with
// the exponent's sign and without leading zeros ("1e+21", "5e-324").
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // and -0
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// strconv writes at least two exponent digits: "1e-07" -> "1e-7".
	if n := len(dst); dst[n-2] == '0' && (dst[n-3] == '+' || dst[n-3] == '-') {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
}
