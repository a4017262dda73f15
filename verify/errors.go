package verify

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify/internal/jcs"
)

// Sentinel errors. Every error Verify returns is a *VerificationError whose
// chain contains exactly one of the "refusal" sentinels below (test with
// errors.Is), and every refusal sentinel wraps ErrRefused.
var (
	// ErrRefused is wrapped by every reason a bundle is refused.
	ErrRefused = errors.New("bundle refused")

	ErrMalformedBundle     = fmt.Errorf("%w: malformed bundle", ErrRefused)
	ErrMalformedCheckpoint = fmt.Errorf("%w: malformed checkpoint", ErrRefused)
	ErrCheckpointOrigin    = fmt.Errorf("%w: checkpoint is for another log", ErrRefused)
	ErrCheckpointSignature = fmt.Errorf("%w: checkpoint not signed by a trusted log key", ErrRefused)
	ErrWitnessQuorum       = fmt.Errorf("%w: too few witness cosignatures", ErrRefused)
	ErrNoRecords           = fmt.Errorf("%w: bundle has no records", ErrRefused)
	ErrMalformedRecord     = fmt.Errorf("%w: malformed record", ErrRefused)
	ErrRecordOrigin        = fmt.Errorf("%w: record is for another log", ErrRefused)
	ErrRunMismatch         = fmt.Errorf("%w: record belongs to another run", ErrRefused)
	ErrSequence            = fmt.Errorf("%w: run_seq or index out of order", ErrRefused)
	ErrChain               = fmt.Errorf("%w: prev does not match the previous record", ErrRefused)
	ErrUnknownKey          = fmt.Errorf("%w: record signed by a key not in trust", ErrRefused)
	ErrRetiredKey          = fmt.Errorf("%w: signed by a retired key", ErrRefused)
	ErrRecordSignature     = fmt.Errorf("%w: invalid record signature", ErrRefused)
	ErrInclusion           = fmt.Errorf("%w: inclusion proof does not verify", ErrRefused)
	ErrNotClosed           = fmt.Errorf("%w: bundle claims closed but run has no final run.closing", ErrRefused)
	ErrAfterClose          = fmt.Errorf("%w: record after run.closing", ErrRefused)
	ErrPolicy              = fmt.Errorf("%w: policy snapshot missing or wrong", ErrRefused)
	ErrReconcile           = fmt.Errorf("%w: run.reconciled missing or inconsistent with the run's model.call records", ErrRefused)

	// ErrInvalidTrust is returned by ParseTrust (and by Verify for a Trust
	// not from ParseTrust). It does not wrap ErrRefused.
	ErrInvalidTrust = errors.New("invalid trust file")

	// ErrMalformedJSON is wrapped by strict JSON failures, next to one of
	// the specific sentinels below.
	ErrMalformedJSON = errors.New("malformed JSON")
	ErrDuplicateKey  = jcs.ErrDuplicateKey
	ErrNumber        = jcs.ErrNumber
	ErrSurrogate     = jcs.ErrSurrogate
	ErrUTF8          = jcs.ErrUTF8
	ErrNotCanonical  = jcs.ErrNotCanonical

	// ErrArgsMismatch: revealed arguments do not open the commitment.
	ErrArgsMismatch = errors.New("arguments do not match commitment")
)

// A VerificationError says which check failed first and carries the
// evidence. Fields that do not apply are zero.
type VerificationError struct {
	// Step names the check, e.g. "checkpoint", "witnesses", "record".
	Step string
	// Position is the record's 0-based position in the bundle's run
	// section (or key section, for Step "key record"), -1 if none.
	Position int
	// Record is the raw record line, if a record failed.
	Record []byte
	// Index and RunSeq are the failing record's claimed values, if parsed
	// (Parsed); a record that did not parse has none.
	Index, RunSeq int64
	Parsed        bool
	// Checkpoint is the signed checkpoint note, when one was read.
	Checkpoint []byte
	// Proof, TreeSize and Root are the inclusion evidence for Step "inclusion".
	Proof    tlog.RecordProof
	TreeSize int64
	Root     tlog.Hash
	// Err is the cause; errors.Is finds the sentinel through it.
	Err error
}

func (e *VerificationError) Error() string {
	if e.Position >= 0 && e.Record != nil && e.Parsed {
		return fmt.Sprintf("%s %d (index %d, run_seq %d): %v", e.Step, e.Position, e.Index, e.RunSeq, e.Err)
	}
	if e.Position >= 0 {
		return fmt.Sprintf("%s %d: %v", e.Step, e.Position, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Step, e.Err)
}

func (e *VerificationError) Unwrap() error { return e.Err }

// A WitnessQuorumError is the evidence of [ErrWitnessQuorum] (Step
// "witnesses"): which trusted witnesses cosigned the checkpoint validly and
// which answered only cosignatures that do not verify. It wraps
// ErrWitnessQuorum.
type WitnessQuorumError struct {
	// Quorum is trust.json's witness_quorum.
	Quorum int
	// Valid are the names of the trusted witnesses with a valid
	// cosignature, sorted; fewer than Quorum.
	Valid []string
	// Invalid are the trusted witnesses, as "<name>+<8 hex key hash>",
	// whose every cosignature on the checkpoint fails to verify, sorted.
	Invalid []string
}

func (e *WitnessQuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d valid cosignatures by trusted witnesses %v, quorum %d", ErrWitnessQuorum, len(e.Valid), e.Valid, e.Quorum)
	for _, w := range e.Invalid {
		fmt.Fprintf(&b, "; invalid cosignature from trusted witness %s", w)
	}
	return b.String()
}

func (e *WitnessQuorumError) Unwrap() error { return ErrWitnessQuorum }

// A RetiredKeyError is the evidence of [ErrRetiredKey] for a checkpoint
// (Step "checkpoint"): every trusted log key that signed it is retired at
// its tree size. It wraps ErrRetiredKey.
type RetiredKeyError struct {
	// TreeSize is the checkpoint's tree size.
	TreeSize int64
	// Keys are the retired keys that signed it, in signature order.
	Keys []RetiredKey
}

// A RetiredKey names a retired log key.
type RetiredKey struct {
	KeyID string // trust.json key_id: the note key hash, 8 hex digits
	Name  string // the note key name (the log's origin)
	// RetiredFromIndex is the first log index the key may not sign (from
	// trust.json or the bundle's key.retired records); a checkpoint of a
	// larger tree needs a key that is not retired.
	RetiredFromIndex int64
}

func (e *RetiredKeyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: checkpoint of size %d signed only by retired keys:", ErrRetiredKey, e.TreeSize)
	for i, k := range e.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " key %s (%s+%s) retired from index %d", k.KeyID, k.Name, k.KeyID, k.RetiredFromIndex)
	}
	return b.String()
}

func (e *RetiredKeyError) Unwrap() error { return ErrRetiredKey }

// Exit codes for a command-line verifier (`custody verify`).
const (
	ExitVerified     = 0 // VERIFIED or VERIFIED TO HEAD n (open)
	ExitRefused      = 1 // the bundle failed verification (ErrRefused)
	ExitUsage        = 2 // bad flags or arguments (the CLI's own)
	ExitInvalidTrust = 3 // trust.json unreadable or invalid (ErrInvalidTrust)
	ExitIO           = 4 // bundle or trust file could not be read
)

// ExitCode maps an error from ParseTrust or Verify to an exit code: 0 for
// nil, ExitInvalidTrust for ErrInvalidTrust, ExitRefused for ErrRefused, and
// ExitIO otherwise.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitVerified
	case errors.Is(err, ErrInvalidTrust):
		return ExitInvalidTrust
	case errors.Is(err, ErrRefused):
		return ExitRefused
	default:
		return ExitIO
	}
}
