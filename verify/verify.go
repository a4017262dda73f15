package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Result describes a verified run.
type Result struct {
	Origin   string // the log's origin
	Run      string // the run id
	Closed   bool   // the run's last record is run.closing
	Records  int    // number of records verified
	Head     int64  // run_seq of the last record (Records-1)
	TreeSize int64  // size of the checkpoint's tree
	// Witnesses are the names of trusted witnesses whose cosignatures
	// verified, sorted.
	Witnesses []string
	// ModelCalls is the number of model.call records: model calls the
	// gateway itself recorded in the run.
	ModelCalls int
	// Reconciled says the run holds run.reconciled (a closed run that
	// recorded model calls always does); Unreported is its
	// unreported_count: tool uses the model requested that no decision of
	// the run matched by tool name and arguments.
	Reconciled bool
	Unreported int
	// Unreadable is run.reconciled's unreadable_responses: model calls
	// whose response could not be read for tool uses (over the gateway's
	// bound, or malformed), which may hide any.
	Unreadable int
	// Repeated is run.reconciled's repeated_count (0 if absent): tool
	// uses a retrieve of a response (model.call method GET, e.g. OpenAI
	// GET /v1/responses/{id}) carried again, counted once.
	Repeated int
}

// String returns "VERIFIED" for a closed run and "VERIFIED TO HEAD
// <Head> (open)" for an open one, followed, when the run's
// reconciliation found any, by " (N model-requested tool uses never
// decided; M model responses unreadable for tool uses)" (either part
// alone when the other is zero), so that such a run never reads as
// clean.
func (r Result) String() string {
	s := "VERIFIED"
	if !r.Closed {
		s = fmt.Sprintf("VERIFIED TO HEAD %d (open)", r.Head)
	}
	var parts []string
	switch {
	case r.Unreported == 1:
		parts = append(parts, "1 model-requested tool use never decided")
	case r.Unreported > 1:
		parts = append(parts, fmt.Sprintf("%d model-requested tool uses never decided", r.Unreported))
	}
	switch {
	case r.Unreadable == 1:
		parts = append(parts, "1 model response unreadable for tool uses")
	case r.Unreadable > 1:
		parts = append(parts, fmt.Sprintf("%d model responses unreadable for tool uses", r.Unreadable))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	return s
}

// An Option configures Verify.
type Option func(*options)

type options struct {
	workers int
}

// WithWorkers sets how many goroutines check record signatures and
// inclusion proofs in parallel. Zero or negative means runtime.GOMAXPROCS(0),
// the default.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// Verify checks an exported run bundle against trust, offline, and returns
// the result or a *VerificationError naming the first check that failed
// (its chain holds one sentinel wrapping ErrRefused). An invalid trust
// returns an error wrapping ErrInvalidTrust instead. Nothing in the bundle
// is trusted: log keys and witnesses come only from trust.
//
// Checks, in order: container and header; the checkpoint's origin, a valid
// signature by a trusted log key (an invalid one by a trusted log key
// refuses the checkpoint), and valid cosignatures from WitnessQuorum
// distinct trusted witnesses (an invalid cosignature counts for nothing and
// refuses nothing by itself, so one misbehaving witness cannot veto a
// checkpoint the others cosigned); key.retired records (signature, inclusion) and
// that a checkpoint signer is not retired at the tree size; at least one
// record; then for each record in order: strict canonical parse, log origin,
// run id, no record after run.closing, run_seq equal to its position (so the
// run starts at 0 and has no gaps), strictly increasing index, prev chain,
// a trusted key not retired at the record's index, its signature, its
// inclusion proof against the checkpoint root, and any policy_hash present
// in the bundle; finally a bundle claiming closed must end with run.closing.
//
// Signature and proof checks run on WithWorkers goroutines; all have
// returned when Verify returns. Verify never panics on malformed input.
func Verify(bundle []byte, trust Trust, opts ...Option) (Result, error) {
	o := options{}
	for _, f := range opts {
		f(&o)
	}
	if o.workers <= 0 {
		o.workers = runtime.GOMAXPROCS(0)
	}
	tc, err := trust.compile()
	if err != nil {
		return Result{}, err
	}
	fail := func(step string, err error) (Result, error) {
		return Result{}, &VerificationError{Step: step, Position: -1, Err: err}
	}

	rb, err := splitBundle(bundle)
	if err != nil {
		return fail("bundle", err)
	}
	h := rb.header
	if !validRunID(h.Run) || h.Run == LogRun {
		return fail("bundle", fmt.Errorf("%w: invalid run id %q", ErrMalformedBundle, h.Run))
	}
	policies := map[string]bool{}
	for _, p := range h.Policies {
		if PolicyHash(p.Snapshot) != p.Hash {
			return fail("policy", fmt.Errorf("%w: snapshot does not hash to %s", ErrPolicy, p.Hash))
		}
		policies[p.Hash] = true
	}

	// Checkpoint.
	cpErr := func(err error) (Result, error) {
		return Result{}, &VerificationError{Step: "checkpoint", Position: -1, Checkpoint: rb.checkpoint, Err: err}
	}
	n, err := note.Open(rb.checkpoint, logKeyVerifiers{tc})
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case err == nil:
	case errors.As(err, &unverified):
		n = unverified.Note
	case errors.As(err, &invalid):
		return cpErr(fmt.Errorf("%w: invalid signature by log key %s+%08x", ErrCheckpointSignature, invalid.Name, invalid.Hash))
	default:
		return cpErr(fmt.Errorf("%w: %w", ErrMalformedCheckpoint, err))
	}
	cp, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return cpErr(err)
	}
	if cp.Origin != tc.origin {
		return cpErr(fmt.Errorf("%w: origin %q, trust has %q", ErrCheckpointOrigin, cp.Origin, tc.origin))
	}
	// n.Sigs holds only verified log key signatures (the Verifiers know
	// no other key).
	var cpSigners []*logKey
	for _, s := range n.Sigs {
		cpSigners = append(cpSigners, tc.noteKeys[nameHash{s.Name, s.Hash}])
	}
	if len(cpSigners) == 0 {
		return cpErr(fmt.Errorf("%w: signed by %s", ErrCheckpointSignature, sigNames(n)))
	}
	witnesses, invalidCosigs := tc.cosignatures(n)
	if len(witnesses) < tc.quorum {
		return Result{}, &VerificationError{Step: "witnesses", Position: -1, Checkpoint: rb.checkpoint,
			Err: &WitnessQuorumError{Quorum: tc.quorum, Valid: witnesses, Invalid: invalidCosigs}}
	}
	v := &verifier{trust: tc, cp: cp, workers: o.workers}

	// Key retirements.
	v.run = LogRun
	keyRecs := v.checkAll(rb.keyRecords)
	lastIndex := int64(-1)
	for i := range keyRecs {
		kr := &keyRecs[i]
		e := func(err error) (Result, error) {
			return Result{}, kr.fail("key record", i, err)
		}
		if kr.err != nil {
			return e(kr.err)
		}
		r := kr.rec
		if r.Log != tc.origin {
			return e(fmt.Errorf("%w: log %q", ErrRecordOrigin, r.Log))
		}
		if r.Run != LogRun || r.Type != TypeKeyRetired {
			return e(fmt.Errorf("%w: key record is run %q type %q, want %q %q", ErrMalformedBundle, r.Run, r.Type, LogRun, TypeKeyRetired))
		}
		if r.Index <= lastIndex {
			return e(fmt.Errorf("%w: key records not in index order", ErrSequence))
		}
		lastIndex = r.Index
		if err := kr.checkKeyAndProof(v); err != nil {
			return e(err)
		}
		id, _ := r.Body["key_id"].(string)
		from, ok := r.Body["retired_from_index"].(int64)
		k := tc.keys[id]
		if !ok || k == nil || from < 0 {
			return e(fmt.Errorf("%w: key.retired body must name a trusted key_id and retired_from_index >= 0", ErrMalformedRecord))
		}
		if k.retired < 0 || from < k.retired {
			k.retired = from
		}
	}
	usable := false
	var retired []RetiredKey
	for _, k := range cpSigners {
		if k.retired < 0 || cp.TreeSize <= k.retired {
			usable = true
		} else {
			retired = append(retired, RetiredKey{KeyID: k.id, Name: k.verifier.Name(), RetiredFromIndex: k.retired})
		}
	}
	if !usable {
		return cpErr(&RetiredKeyError{TreeSize: cp.TreeSize, Keys: retired})
	}

	// The run's records.
	if len(rb.records) == 0 {
		return fail("records", ErrNoRecords)
	}
	v.run = h.Run
	recs := v.checkAll(rb.records)
	var prev *checked
	var rc reconciliation
	for i := range recs {
		c := &recs[i]
		e := func(err error) (Result, error) { return Result{}, c.fail("record", i, err) }
		if c.err != nil {
			return e(c.err)
		}
		r := c.rec
		switch {
		case r.Log != tc.origin:
			return e(fmt.Errorf("%w: log %q, trust has %q", ErrRecordOrigin, r.Log, tc.origin))
		case r.Run != h.Run:
			return e(fmt.Errorf("%w: run %q, bundle is for %q", ErrRunMismatch, r.Run, h.Run))
		case prev != nil && prev.rec.Type == TypeRunClosing:
			return e(ErrAfterClose)
		case r.RunSeq != int64(i):
			if i == 0 {
				return e(fmt.Errorf("%w: run starts at run_seq %d, want 0", ErrSequence, r.RunSeq))
			}
			return e(fmt.Errorf("%w: run_seq %d at position %d (previous %d)", ErrSequence, r.RunSeq, i, prev.rec.RunSeq))
		case prev != nil && r.Index <= prev.rec.Index:
			return e(fmt.Errorf("%w: index %d not after previous record's %d", ErrSequence, r.Index, prev.rec.Index))
		case prev != nil && (!c.hasPrev || c.prev != prev.chain):
			return e(fmt.Errorf("%w: prev %s, previous record hashes to %s", ErrChain, hex.EncodeToString(c.prev[:]), hex.EncodeToString(prev.chain[:])))
		}
		if err := c.checkKeyAndProof(v); err != nil {
			return e(err)
		}
		if ph, ok := r.Body["policy_hash"].(string); ok && !policies[ph] {
			return e(fmt.Errorf("%w: policy %s not in bundle", ErrPolicy, ph))
		}
		var next *Record
		if i+1 < len(recs) {
			next = recs[i+1].rec
		}
		if err := rc.add(r, next); err != nil {
			return e(err)
		}
		prev = c
	}
	last := recs[len(recs)-1].rec
	closed := last.Type == TypeRunClosing
	if h.Closed && !closed {
		return Result{}, &VerificationError{Step: "closed", Position: len(recs) - 1, Index: last.Index, RunSeq: last.RunSeq,
			Record: recs[len(recs)-1].raw, Err: fmt.Errorf("%w: last record is %s", ErrNotClosed, last.Type)}
	}
	return Result{
		Origin:     tc.origin,
		Run:        h.Run,
		Closed:     closed,
		Records:    len(recs),
		Head:       last.RunSeq,
		TreeSize:   cp.TreeSize,
		Witnesses:  witnesses,
		ModelCalls: rc.modelCalls,
		Reconciled: rc.reconciled,
		Unreported: rc.unreported,
		Unreadable: rc.unreadable,
		Repeated:   rc.repeated,
	}, nil
}

func sigNames(n *note.Note) string {
	var b bytes.Buffer
	for _, s := range append(append([]note.Signature(nil), n.Sigs...), n.UnverifiedSigs...) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s+%08x", s.Name, s.Hash)
	}
	if b.Len() == 0 {
		return "nobody"
	}
	return b.String()
}

type verifier struct {
	run     string // expected run id of the records being checked (a hint)
	trust   *compiled
	cp      Checkpoint
	workers int
}

// checked holds the independent per-record results computed in parallel.
type checked struct {
	raw     []byte           // record bytes
	proof   tlog.RecordProof // kept only when inclErr != nil
	rec     *Record
	err     error    // container or parse error
	chain   [32]byte // SHA-256(raw); ChainHash is its hex
	prev    [32]byte // decoded "prev" when hasPrev
	hasPrev bool
	sigOK   bool // signature verified with the key named by key_id, if trusted
	inclErr error
	recv    Record
}

func (c *checked) fail(step string, pos int, err error) error {
	e := &VerificationError{Step: step, Position: pos, Record: c.raw, Err: err}
	if c.rec != nil {
		e.Index, e.RunSeq, e.Parsed = c.rec.Index, c.rec.RunSeq, true
	}
	return e
}

// checkKeyAndProof reports, in order, an untrusted or retired key, a bad
// signature and a bad inclusion proof.
func (c *checked) checkKeyAndProof(v *verifier) error {
	r := c.rec
	k := v.trust.keys[r.KeyID]
	switch {
	case k == nil:
		return fmt.Errorf("%w: key_id %s", ErrUnknownKey, r.KeyID)
	case k.retired >= 0 && r.Index >= k.retired:
		return fmt.Errorf("%w: key %s retired from index %d, record index %d", ErrRetiredKey, k.id, k.retired, r.Index)
	case !c.sigOK:
		return fmt.Errorf("%w: key %s", ErrRecordSignature, k.id)
	case c.inclErr != nil:
		return &VerificationError{Step: "inclusion", Position: -1, Proof: c.proof, TreeSize: v.cp.TreeSize,
			Root: v.cp.Root, Index: r.Index, RunSeq: r.RunSeq, Err: c.inclErr}
	}
	return nil
}

// checkAll parses each line and checks signatures and proofs in parallel.
// Workers take blocks of consecutive lines, so that a worker's inclusion
// proofs share most of their audit paths (see inclusionChecker).
func (v *verifier) checkAll(lines [][]byte) []checked {
	out := make([]checked, len(lines))
	const block = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	workers := min(v.workers, (len(lines)+block-1)/block)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := scratch{incl: inclusionChecker{size: v.cp.TreeSize, root: v.cp.Root}}
			for {
				lo := int(next.Add(block)) - block
				if lo >= len(lines) {
					return
				}
				for i := lo; i < min(lo+block, len(lines)); i++ {
					v.check(lines[i], &out[i], &s)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

var sigField = []byte(`,"sig":"`)

// scratch is a worker's reusable state.
type scratch struct {
	msg  []byte
	fr   fastRecord
	line proofLines
	incl inclusionChecker
}

func (v *verifier) internStr(field int, b []byte) string {
	switch field {
	case 0:
		if k := v.trust.keys[string(b)]; k != nil {
			return k.id
		}
	case 1:
		if string(b) == v.trust.origin {
			return v.trust.origin
		}
	case 2:
		if string(b) == v.run {
			return v.run
		}
	case 3:
		switch string(b) {
		case TypeCallDecided:
			return TypeCallDecided
		case TypeCallCompleted:
			return TypeCallCompleted
		case TypeModelEvent:
			return TypeModelEvent
		case TypeRunRegistered:
			return TypeRunRegistered
		case TypeRunClosing:
			return TypeRunClosing
		case TypeKeyRetired:
			return TypeKeyRetired
		case TypeApprovalRequested:
			return TypeApprovalRequested
		case TypeApprovalConsumed:
			return TypeApprovalConsumed
		}
	}
	return string(b)
}

func (v *verifier) check(line []byte, c *checked, s *scratch) {
	defer func() {
		// Belt and braces: a panic in a dependency on hostile input must
		// not take down the caller.
		if p := recover(); p != nil {
			c.err = fmt.Errorf("%w: internal error: %v", ErrMalformedRecord, p)
			// Forget what the worker remembers of previous lines.
			s.line, s.incl.ok = proofLines{}, false
		}
	}()
	raw, proof, err := s.line.parse(line)
	if err != nil {
		c.raw, c.err = line, err
		return
	}
	c.raw = raw
	var r *Record
	at, end := -1, -1
	if s.fr.parse(raw, &c.recv, v.internStr) {
		r = &c.recv
		c.prev, c.hasPrev = s.fr.prev, s.fr.hasPrev
		at, end = s.fr.sigAt, s.fr.sigEnd
	} else {
		r, err = ParseRecord(raw)
		if err != nil {
			c.proof = append(tlog.RecordProof(nil), proof...)
			c.err = err
			return
		}
		if r.Prev != "" {
			if _, err := hex.Decode(c.prev[:], []byte(r.Prev)); err == nil {
				c.hasPrev = true
			}
		}
		// raw is canonical, so the record without "sig" is raw with its
		// top-level `,"sig":"…"` member cut out. It is the last occurrence:
		// only "time", "type" and "v" follow, and their values are
		// validated not to contain it.
		var sigb [88]byte
		base64.StdEncoding.Encode(sigb[:], r.Sig)
		at = bytes.LastIndex(raw, sigField)
		end = at + len(sigField) + len(sigb) + 1
		if !(at >= 0 && end <= len(raw) && bytes.Equal(raw[at+len(sigField):end-1], sigb[:])) {
			at = -1
		}
	}
	c.rec = r
	c.chain = sha256.Sum256(raw)
	if k := v.trust.keys[r.KeyID]; k != nil && at >= 0 {
		msg := appendSignedPrefix(s.msg[:0], r)
		if c.hasPrev {
			msg = hex.AppendEncode(msg, c.prev[:])
		}
		msg = append(msg, 0)
		msg = append(msg, raw[:at]...)
		msg = append(msg, raw[end:]...)
		s.msg = msg
		c.sigOK = ed25519.Verify(k.pub, msg, r.Sig)
	}
	if r == &c.recv {
		r.Sig = nil // aliases s.fr.sig; nothing reads it after this
	}
	if r.Index >= v.cp.TreeSize {
		c.inclErr = fmt.Errorf("%w: index %d not in tree of size %d", ErrInclusion, r.Index, v.cp.TreeSize)
	} else if leaf := LeafHash(raw); !s.incl.check(proof, r.Index, leaf) {
		// The checker refuses exactly what tlog.CheckRecord refuses
		// (FuzzInclusionAgrees); tlog.CheckRecord has the last word and
		// names the failure.
		if err := tlog.CheckRecord(proof, v.cp.TreeSize, v.cp.Root, r.Index, leaf); err != nil {
			c.inclErr = fmt.Errorf("%w: %w", ErrInclusion, err)
		}
	}
	if c.inclErr != nil {
		c.proof = append(tlog.RecordProof(nil), proof...)
	}
}
