package verify

import (
	"bytes"
	"time"

	"github.com/agentcustody/custody/verify/internal/jcs"
)

// fastRecord is the verifier's fast path for ParseRecord. It accepts only
// a subset of what ParseRecord accepts (canonical records whose top-level
// strings need no escapes), yielding the same field values, and reports
// false for anything else; the caller then falls back to ParseRecord, which
// decides and names the error. The body is validated with the strict
// canonical parser at the same nesting depth ParseRecord uses; it is
// materialised only when the verifier reads it (a "policy_hash" member may
// be present, or a key.retired record).
//
// On success r's fields are set, with r.Sig aliasing sig and r.Prev left
// empty (prev holds its decoded bytes, hasPrev whether it is non-empty);
// sigAt and sigEnd delimit the `,"sig":"…"` member in raw.
type fastRecord struct {
	prev    [32]byte
	hasPrev bool
	sig     [64]byte
	sigAt   int
	sigEnd  int
}

type fastCursor struct {
	b  []byte
	i  int
	ok bool
}

func (c *fastCursor) lit(s string) {
	if !c.ok || len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		c.ok = false
		return
	}
	c.i += len(s)
}

// str reads a JSON string's contents, requiring no escapes or control
// characters and, to keep the subset simple, only printable ASCII.
func (c *fastCursor) str() []byte {
	if !c.ok {
		return nil
	}
	start := c.i
	for c.i < len(c.b) {
		switch ch := c.b[c.i]; {
		case ch == '"':
			s := c.b[start:c.i]
			c.i++
			return s
		case ch < 0x20 || ch >= 0x7f || ch == '\\':
			c.ok = false
			return nil
		}
		c.i++
	}
	c.ok = false
	return nil
}

// uint reads a canonical non-negative integer at most jcs.MaxSafeInteger.
func (c *fastCursor) uint() int64 {
	if !c.ok {
		return 0
	}
	start := c.i
	var v int64
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		v = v*10 + int64(c.b[c.i]-'0')
		c.i++
		if c.i-start > 16 {
			c.ok = false
			return 0
		}
	}
	n := c.i - start
	if n == 0 || n > 1 && c.b[start] == '0' || v > jcs.MaxSafeInteger {
		c.ok = false
		return 0
	}
	return v
}

func digits(b []byte) (int, bool) {
	v := 0
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + int(ch-'0')
	}
	return v, true
}

// fastTime reports whether ts is exactly t.Format(TimeLayout) for the
// t time.Parse(TimeLayout, ts) returns, with year >= 1.
func fastTime(ts []byte) (time.Time, bool) {
	// 2006-01-02T15:04:05.000Z
	if len(ts) != 24 || ts[4] != '-' || ts[7] != '-' || ts[10] != 'T' || ts[13] != ':' ||
		ts[16] != ':' || ts[19] != '.' || ts[23] != 'Z' {
		return time.Time{}, false
	}
	y, ok1 := digits(ts[0:4])
	mo, ok2 := digits(ts[5:7])
	d, ok3 := digits(ts[8:10])
	h, ok4 := digits(ts[11:13])
	mi, ok5 := digits(ts[14:16])
	s, ok6 := digits(ts[17:19])
	ms, ok7 := digits(ts[20:23])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, ms*1e6, time.UTC)
	if t.Year() != y || int(t.Month()) != mo || t.Day() != d {
		return time.Time{}, false // day out of range for the month
	}
	return t, true
}

// lowerHexValue maps '0'-'9' and 'a'-'f' to their value and every other
// byte to 0xff.
var lowerHexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// decodeLowerHex reports whether src is 2*len(dst) lowercase hex digits
// (isLowerHex) and decodes them into dst, in one pass.
func decodeLowerHex(dst, src []byte) bool {
	if len(src) != 2*len(dst) {
		return false
	}
	for i := range dst {
		h, l := lowerHexValue[src[2*i]], lowerHexValue[src[2*i+1]]
		if h|l == 0xff {
			return false
		}
		dst[i] = h<<4 | l
	}
	return true
}

var policyHashName = []byte(`policy_hash"`)

// modelCallMark and reconciledMark are in the records whose bodies
// Verify reads for the run's reconciliation (a false match only costs a
// parse).
var (
	modelCallMark  = []byte(`"type":"model.call"`)
	reconciledMark = []byte(`"type":"run.reconciled"`)
)

// parse fills r from raw, or reports false. internStr maps validated
// top-level strings to strings, allocating only when needed.
func (f *fastRecord) parse(raw []byte, r *Record, internStr func(field int, b []byte) string) bool {
	if len(raw) > MaxRecordSize {
		return false
	}
	c := fastCursor{b: raw, ok: true}
	c.lit(`{"body":`)
	if !c.ok {
		return false
	}
	bodyStart := c.i
	if bodyStart >= len(raw) || raw[bodyStart] != '{' {
		return false
	}
	// The record object is at depth 1, as in ParseRecord's parse. A body
	// the verifier may read is parsed once, building it; others are only
	// validated. A body member "policy_hash" puts `policy_hash"` in raw
	// (canonical JSON writes the name without escapes); the same text
	// elsewhere only costs building a body that is not read. The pattern
	// leaves out the opening quote because bytes.Contains scans for its
	// first byte, and records are full of quotes.
	var bodyValue any
	var n int
	var err error
	if bytes.Contains(raw, policyHashName) || bytes.Contains(raw, modelCallMark) || bytes.Contains(raw, reconciledMark) {
		bodyValue, n, err = jcs.ParseCanonicalPrefix(raw[bodyStart:], 1)
	} else {
		n, err = jcs.ValidateCanonicalPrefix(raw[bodyStart:], 1)
	}
	if err != nil || n == 0 {
		return false
	}
	body := raw[bodyStart : bodyStart+n]
	c.i += n
	c.lit(`,"index":`)
	r.Index = c.uint()
	c.lit(`,"key_id":"`)
	keyID := c.str()
	c.lit(`,"log":"`)
	log := c.str()
	c.lit(`,"prev":"`)
	prev := c.str()
	c.lit(`,"run":"`)
	run := c.str()
	c.lit(`,"run_seq":`)
	r.RunSeq = c.uint()
	f.sigAt = c.i
	c.lit(`,"sig":"`)
	sig := c.str()
	f.sigEnd = c.i
	c.lit(`,"time":"`)
	ts := c.str()
	c.lit(`,"type":"`)
	typ := c.str()
	c.lit(`,"v":1}`)
	if !c.ok || c.i != len(raw) {
		return false
	}
	r.V = RecordVersion
	if len(sig) != 88 {
		return false
	}
	// 88 characters decode to up to 66 bytes (without padding): decode
	// into room for that, then require exactly 64.
	var buf [66]byte
	if k, err := strictBase64.Decode(buf[:], sig); err != nil || k != 64 {
		return false
	}
	copy(f.sig[:], buf[:64])
	r.Sig = f.sig[:]
	t, ok := fastTime(ts)
	if !ok {
		return false
	}
	r.Time = t
	if !isLowerHex(keyID, 8) || !validOrigin(log) || !validRunID(run) || !validType(typ) {
		return false
	}
	switch {
	case len(prev) == 0:
		if r.RunSeq != 0 {
			return false
		}
		f.hasPrev = false
	case r.RunSeq > 0 && decodeLowerHex(f.prev[:], prev):
		f.hasPrev = true
	default:
		return false
	}
	r.KeyID = internStr(0, keyID)
	r.Log = internStr(1, log)
	r.Run = internStr(2, run)
	r.Type = internStr(3, typ)
	r.Prev = ""
	r.Body = nil
	if bodyValue == nil && r.Type == TypeKeyRetired {
		if bodyValue, _, err = jcs.ParseCanonicalPrefix(body, 1); err != nil {
			return false
		}
	}
	if bodyValue != nil {
		m, ok := bodyValue.(map[string]any)
		if !ok {
			return false
		}
		r.Body = m
	}
	return true
}
