package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify/internal/jcs"
)

// RecordVersion is the only record format version, the value of "v".
const RecordVersion = 1

// Record types the verifier gives meaning to. Other types are allowed and
// verified like any record.
const (
	TypeRunRegistered     = "run.registered"
	TypeCallDecided       = "call.decided"
	TypeApprovalRequested = "approval.requested"
	TypeApprovalConsumed  = "approval.consumed"
	TypeCallCompleted     = "call.completed"
	TypeModelEvent        = "model.event"
	TypeModelCall         = "model.call"
	TypeRunReconciled     = "run.reconciled"
	TypeRunClosing        = "run.closing"
	TypeKeyRetired        = "key.retired"
	TypeRollbackDetected  = "log.rollback_detected"
	TypeForkDetected      = "log.fork_detected"
)

// LogRun is the reserved run id of log-level records (key.retired,
// log.rollback_detected, log.fork_detected, calls refused after a run
// closed). Run ids starting with "_" are reserved for the log: a record of
// any other such run is malformed.
const LogRun = "_log"

// TimeLayout is the layout of a record's "time": RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// MaxRecordSize is the largest canonical record, in bytes, ParseRecord accepts.
const MaxRecordSize = 1 << 20

const (
	recordDomain = "custody-record-v1"
	argsDomain   = "custody-args-v1"
	// ArgsSaltSize is the size in bytes of an argument commitment's salt.
	ArgsSaltSize = 32
)

// A Record is one signed entry of the log. See the package doc, # Format.
type Record struct {
	V      int64          // format version, RecordVersion
	Log    string         // the log's origin
	Index  int64          // leaf index in the log (RFC 6962 leaf number)
	Run    string         // run id
	RunSeq int64          // position in the run, from 0
	Prev   string         // ChainHash of the run's previous record, "" at RunSeq 0
	Type   string         // record type, e.g. TypeCallDecided
	Time   time.Time      // when the signer wrote it, truncated to milliseconds, UTC
	Body   map[string]any // type-specific; values as returned by CanonicalizeJSON's parser
	KeyID  string         // KeyID of the signing key
	Sig    []byte         // Ed25519 signature over SignedMessage
}

// KeyID returns the key id of an Ed25519 log key: the note key hash
// (SHA-256(name || "\n" || 0x01 || pub)[:4], as in golang.org/x/mod/sumdb/note)
// written as 8 lowercase hex digits. It equals the hash field of the key's
// note verifier key "name+hash+key".
func KeyID(name string, pub ed25519.PublicKey) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', 1})
	h.Write(pub)
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// Canonicalize encodes v with encoding/json and returns its RFC 8785 canonical
// form, failing if the result is outside the accepted subset (see
// CanonicalizeJSON).
func Canonicalize(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CanonicalizeJSON(b)
}

// CanonicalizeJSON strictly parses b and returns its RFC 8785 (JCS) form,
// e.g. {"b":1,"a":[1.0,1e21]} -> {"a":[1,1e+21],"b":1}. Numbers that a
// double cannot hold exactly as written (ErrNumber: 9007199254740993, 1e400,
// "-0", 1152921504606847000), duplicate member names, lone surrogates, invalid UTF-8 and trailing
// data are rejected (errors wrap ErrMalformedJSON and a specific sentinel
// such as ErrDuplicateKey).
func CanonicalizeJSON(b []byte) ([]byte, error) {
	out, err := jcs.Canonicalize(b)
	if err != nil {
		return nil, jsonErr(err)
	}
	return out, nil
}

// strictBase64 is standard padded base64 refusing non-zero padding bits, so
// that every byte string has exactly one encoding. (Encoding.Strict copies
// the encoding on each call.)
var strictBase64 = base64.StdEncoding.Strict()

func jsonErr(err error) error {
	return fmt.Errorf("%w: %w", ErrMalformedJSON, err)
}

func (r *Record) object(withSig bool) (map[string]any, error) {
	body, err := NewBody(r.Body)
	if err != nil {
		return nil, err
	}
	m := map[string]any{
		"v":       r.V,
		"log":     r.Log,
		"index":   r.Index,
		"run":     r.Run,
		"run_seq": r.RunSeq,
		"prev":    r.Prev,
		"type":    r.Type,
		"time":    r.Time.UTC().Format(TimeLayout),
		"body":    body,
		"key_id":  r.KeyID,
	}
	if withSig {
		m["sig"] = base64.StdEncoding.EncodeToString(r.Sig)
	}
	return m, nil
}

// CanonicalRecord returns the canonical bytes of r including "sig": the
// bytes that are the log leaf, that LeafHash and ChainHash hash, and that a
// bundle carries.
func CanonicalRecord(r *Record) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	m, err := r.object(true)
	if err != nil {
		return nil, err
	}
	return jcs.Append(nil, m)
}

// SignedMessage returns the exact bytes the record's Ed25519 signature covers:
//
//	"custody-record-v1" 0x00 log 0x00 index 0x00 run 0x00 run_seq 0x00 prev 0x00 canonical(record without "sig")
//
// with index and run_seq in decimal.
func SignedMessage(r *Record) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	m, err := r.object(false)
	if err != nil {
		return nil, err
	}
	msg, _, err := signedMessage(r, m)
	return msg, err
}

// signedMessage returns r's signed message, with m its object without
// "sig", and the offset in it where m's canonical form starts (what
// follows the prefix, prev and its NUL).
func signedMessage(r *Record, m map[string]any) (msg []byte, canonical int, err error) {
	b := appendSignedPrefix(make([]byte, 0, 512), r)
	b = append(b, r.Prev...)
	b = append(b, 0)
	canonical = len(b)
	msg, err = jcs.Append(b, m)
	return msg, canonical, err
}

// appendSignedPrefix appends the start of a record's signed message, up to
// and including the NUL after run_seq: the domain, log, index, run and
// run_seq fields of the format in the package doc. prev, a NUL and the
// record without "sig" follow.
func appendSignedPrefix(b []byte, r *Record) []byte {
	b = append(b, recordDomain...)
	b = append(b, 0)
	b = append(b, r.Log...)
	b = append(b, 0)
	b = strconv.AppendInt(b, r.Index, 10)
	b = append(b, 0)
	b = append(b, r.Run...)
	b = append(b, 0)
	b = strconv.AppendInt(b, r.RunSeq, 10)
	return append(b, 0)
}

// SignRecord sets r.V (if zero), r.KeyID and r.Sig, signing with s (a note
// signer for an Ed25519 key, as from note.NewSigner; the same key signs
// checkpoints), and returns the canonical record bytes.
func SignRecord(r *Record, s note.Signer) ([]byte, error) {
	if r.V == 0 {
		r.V = RecordVersion
	}
	r.KeyID = fmt.Sprintf("%08x", s.KeyHash())
	r.Time = r.Time.UTC().Truncate(time.Millisecond)
	r.Sig = nil
	if err := r.check(); err != nil {
		return nil, err
	}
	m, err := r.object(false)
	if err != nil {
		return nil, err
	}
	msg, canonical, err := signedMessage(r, m)
	if err != nil {
		return nil, err
	}
	sig, err := s.Sign(msg)
	if err != nil {
		return nil, fmt.Errorf("sign record: %w", err)
	}
	r.Sig = sig
	// The message ends with the record's canonical form without "sig";
	// the record is that with "sig" put in its place, so the body is
	// canonicalised once.
	if raw, ok := insertSig(msg[canonical:], m, sig); ok {
		return raw, nil
	}
	return CanonicalRecord(r)
}

// insertSig returns the canonical record with "sig" from unsigned, its
// canonical form without it (the JCS object of m), or false if unsigned
// does not end as expected. In JCS order "sig" falls between "run_seq"
// and "time", and "time", "type" and "v" are the last members, so it goes
// right before the canonical form of those three; a standard base64
// value needs no escaping.
func insertSig(unsigned []byte, m map[string]any, sig []byte) ([]byte, bool) {
	last, err := jcs.Append(nil, map[string]any{"time": m["time"], "type": m["type"], "v": m["v"]})
	if err != nil || len(last) < 2 {
		return nil, false
	}
	last[0] = ',' // ,"time":…,"type":…,"v":…}
	if !bytes.HasSuffix(unsigned, last) {
		return nil, false
	}
	head := unsigned[:len(unsigned)-len(last)]
	n := base64.StdEncoding.EncodedLen(len(sig))
	out := make([]byte, 0, len(unsigned)+len(`,"sig":""`)+n)
	out = append(out, head...)
	out = append(out, `,"sig":"`...)
	out = base64.StdEncoding.AppendEncode(out, sig)
	out = append(out, '"')
	return append(out, last...), true
}

// VerifyRecordSignature checks r's signature with pub. It does not check
// that the key is trusted or unretired; Verify does that.
func VerifyRecordSignature(r *Record, pub ed25519.PublicKey) error {
	msg, err := SignedMessage(r)
	if err != nil {
		return err
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, msg, r.Sig) {
		return ErrRecordSignature
	}
	return nil
}

// LeafHash is the RFC 6962 leaf hash of a canonical record,
// SHA-256(0x00 || raw), computed by tlog.RecordHash.
func LeafHash(raw []byte) tlog.Hash { return tlog.RecordHash(raw) }

// ChainHash is the value the next record of the run puts in "prev": the
// lowercase hex SHA-256 of the canonical record bytes including "sig".
func ChainHash(raw []byte) string {
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:])
}

// CommitArgs returns a record's "args_commitment" for a call's arguments:
//
//	hex(SHA-256("custody-args-v1" 0x00 || salt || canonicalArgs))
//
// salt is ArgsSaltSize fresh random bytes per record (revealed later, base64,
// to open the commitment for one record); canonicalArgs is the arguments'
// JCS form (CanonicalizeJSON). It fails on a salt of the wrong size.
func CommitArgs(salt, canonicalArgs []byte) (string, error) {
	if len(salt) != ArgsSaltSize {
		return "", fmt.Errorf("args salt is %d bytes, want %d", len(salt), ArgsSaltSize)
	}
	h := sha256.New()
	h.Write([]byte(argsDomain))
	h.Write([]byte{0})
	h.Write(salt)
	h.Write(canonicalArgs)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// VerifyArgsReveal checks that salt and args (any JSON; it is canonicalized
// strictly first) open commitment. A mismatch wraps ErrArgsMismatch.
func VerifyArgsReveal(commitment string, salt, args []byte) error {
	c, err := CanonicalizeJSON(args)
	if err != nil {
		return fmt.Errorf("revealed args: %w", err)
	}
	got, err := CommitArgs(salt, c)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrArgsMismatch, err)
	}
	if got != commitment {
		return fmt.Errorf("%w: commitment %s, revealed %s", ErrArgsMismatch, commitment, got)
	}
	return nil
}

// check validates field shapes shared by encoding and parsing.
func (r *Record) check() error {
	switch {
	case r.V != RecordVersion:
		return fmt.Errorf("%w: v = %d, want %d", ErrMalformedRecord, r.V, RecordVersion)
	case !validOrigin(r.Log):
		return fmt.Errorf("%w: invalid log origin %q", ErrMalformedRecord, r.Log)
	case r.Index < 0 || r.Index > jcs.MaxSafeInteger:
		return fmt.Errorf("%w: index %d out of range", ErrMalformedRecord, r.Index)
	case !validRunID(r.Run):
		return fmt.Errorf("%w: invalid run id %q", ErrMalformedRecord, r.Run)
	case r.RunSeq < 0 || r.RunSeq > jcs.MaxSafeInteger:
		return fmt.Errorf("%w: run_seq %d out of range", ErrMalformedRecord, r.RunSeq)
	case r.RunSeq == 0 && r.Prev != "":
		return fmt.Errorf("%w: run_seq 0 with prev %q", ErrMalformedRecord, r.Prev)
	case r.RunSeq > 0 && !isLowerHex(r.Prev, 64):
		return fmt.Errorf("%w: prev %q is not 64 lowercase hex digits", ErrMalformedRecord, r.Prev)
	case !validType(r.Type):
		return fmt.Errorf("%w: invalid type %q", ErrMalformedRecord, r.Type)
	case r.KeyID != "" && !isLowerHex(r.KeyID, 8):
		return fmt.Errorf("%w: key_id %q is not 8 lowercase hex digits", ErrMalformedRecord, r.KeyID)
	}
	if y := r.Time.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: time out of range", ErrMalformedRecord)
	}
	return nil
}

// ParseRecord strictly parses canonical record bytes. It rejects anything
// that is not exactly CanonicalRecord's output for some valid Record: bad
// JSON (wrapping ErrMalformedJSON and the specific sentinel), unknown or
// missing fields, wrong types, and non-canonical encodings (ErrNotCanonical).
// It does not check the signature.
func ParseRecord(raw []byte) (*Record, error) {
	if len(raw) > MaxRecordSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMalformedRecord, len(raw), MaxRecordSize)
	}
	// ParseCanonical accepts only canonical bytes, so raw ==
	// CanonicalRecord(r) for the Record built below.
	v, err := jcs.ParseCanonical(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, jsonErr(err))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformedRecord)
	}
	r := new(Record)
	f := fields{m: m}
	r.V = f.int("v")
	r.Log = f.str("log")
	r.Index = f.int("index")
	r.Run = f.str("run")
	r.RunSeq = f.int("run_seq")
	r.Prev = f.str("prev")
	r.Type = f.str("type")
	ts := f.str("time")
	r.Body = f.obj("body")
	r.KeyID = f.str("key_id")
	sig := f.str("sig")
	if f.err != nil {
		return nil, f.err
	}
	if len(m) != 11 {
		return nil, fmt.Errorf("%w: unknown fields (%d members, want 11)", ErrMalformedRecord, len(m))
	}
	t, err := time.Parse(TimeLayout, ts)
	if err != nil || t.Format(TimeLayout) != ts {
		return nil, fmt.Errorf("%w: time %q is not RFC 3339 UTC with milliseconds", ErrMalformedRecord, ts)
	}
	r.Time = t
	if r.Sig, err = strictBase64.DecodeString(sig); err != nil || len(r.Sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: sig is not a base64 Ed25519 signature", ErrMalformedRecord)
	}
	if !isLowerHex(r.KeyID, 8) {
		return nil, fmt.Errorf("%w: key_id %q is not 8 lowercase hex digits", ErrMalformedRecord, r.KeyID)
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

type fields struct {
	m   map[string]any
	err error
}

func (f *fields) get(k string) any {
	v, ok := f.m[k]
	if !ok && f.err == nil {
		f.err = fmt.Errorf("%w: missing field %q", ErrMalformedRecord, k)
	}
	return v
}

func (f *fields) typeErr(k, want string) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: field %q is not %s", ErrMalformedRecord, k, want)
	}
}

func (f *fields) int(k string) int64 {
	v, ok := f.get(k).(int64)
	if !ok {
		f.typeErr(k, "an integer")
	}
	return v
}

func (f *fields) str(k string) string {
	v, ok := f.get(k).(string)
	if !ok {
		f.typeErr(k, "a string")
	}
	return v
}

func (f *fields) obj(k string) map[string]any {
	v, ok := f.get(k).(map[string]any)
	if !ok {
		f.typeErr(k, "an object")
	}
	return v
}

// The validators take strings or byte slices, so that the fast record parser
// checks bytes without copying them into strings.

// validOrigin reports whether s is an acceptable log origin: 1 to 255
// printable ASCII bytes without space or '+' (so it can also be a note key
// name and a C2SP checkpoint origin line).
func validOrigin[S ~string | ~[]byte](s S) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '+' {
			return false
		}
	}
	return true
}

// validRunID: 1 to 128 bytes of [A-Za-z0-9._:-], not starting with "_"
// (reserved for the log), or the reserved LogRun itself.
func validRunID[S ~string | ~[]byte](s S) bool {
	if len(s) == 0 || len(s) > 128 || s[0] == '_' && string(s) != LogRun {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// validType: 1 to 64 bytes of [a-z0-9._].
func validType[S ~string | ~[]byte](s S) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

func isLowerHex[S ~string | ~[]byte](s S, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// NewBody converts v (a struct with json tags, a map, or nil for {}) into
// a record body: a JSON object built from the types CanonicalizeJSON accepts.
// A map[string]any already in that form is returned as is; anything else
// goes through encoding/json, which writes invalid UTF-8 as U+FFFD.
func NewBody(v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	if m, ok := v.(map[string]any); ok {
		if m == nil {
			return map[string]any{}, nil
		}
		if _, err := jcs.Append(nil, m); err == nil {
			return m, nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: body: %w", ErrMalformedRecord, err)
	}
	p, err := jcs.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w: body: %w", ErrMalformedRecord, jsonErr(err))
	}
	m, ok := p.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrMalformedRecord)
	}
	return m, nil
}
