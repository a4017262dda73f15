package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// BundleMagic is the first line of a bundle.
const BundleMagic = "custody-bundle-v1"

// A Bundle is one run exported for offline verification. See the package
// doc, # Format, for its byte layout.
type Bundle struct {
	Header BundleHeader
	// Records are the run's records in run_seq order, each with its
	// inclusion proof in the checkpoint's tree.
	Records []BundleRecord
	// KeyRecords are key.retired records of run LogRun, in index order,
	// each with its inclusion proof in the checkpoint's tree.
	KeyRecords []BundleRecord
	// Checkpoint is the signed note (checkpoint body, log signature,
	// witness cosignatures), verbatim.
	Checkpoint []byte
}

// BundleHeader is the bundle's second line, a JSON object.
type BundleHeader struct {
	V      int    `json:"v"`      // BundleVersion
	Run    string `json:"run"`    // the run id
	Closed bool   `json:"closed"` // claim: the run ends with run.closing
	// Keys lists the signing keys the records use. Informational only: the
	// verifier trusts keys only from trust.json.
	Keys []BundleKey `json:"keys,omitempty"`
	// Policies are the policy snapshots records reference by "policy_hash".
	Policies []PolicySnapshot `json:"policies,omitempty"`
}

// BundleVersion is the header's "v".
const BundleVersion = 1

// BundleKey is an informational key entry.
type BundleKey struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"` // base64
}

// A PolicySnapshot is the exact policy file bytes a decision used.
type PolicySnapshot struct {
	Hash     string `json:"hash"`     // lowercase hex SHA-256 of Snapshot
	Snapshot []byte `json:"snapshot"` // base64 in JSON
}

// PolicyHash is the value records put in body "policy_hash" for a policy
// file: lowercase hex SHA-256 of its bytes.
func PolicyHash(policy []byte) string {
	h := sha256.Sum256(policy)
	return hex.EncodeToString(h[:])
}

// A BundleRecord is a canonical record and its RFC 6962 inclusion proof
// (Merkle audit path, tlog.RecordProof) to the checkpoint's tree.
type BundleRecord struct {
	Record []byte
	Proof  tlog.RecordProof
}

// Marshal encodes b in the bundle container format.
func (b *Bundle) Marshal() ([]byte, error) {
	h := b.Header
	if h.V == 0 {
		h.V = BundleVersion
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	hj, err = CanonicalizeJSON(hj)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(BundleMagic + "\n")
	buf.Write(hj)
	buf.WriteByte('\n')
	for _, sec := range []struct {
		tag  string
		recs []BundleRecord
	}{{"R", b.Records}, {"K", b.KeyRecords}} {
		for _, r := range sec.recs {
			if bytes.ContainsAny(r.Record, "\t\n") {
				return nil, fmt.Errorf("%w: record is not canonical", ErrMalformedBundle)
			}
			buf.WriteString(sec.tag)
			buf.WriteByte('\t')
			buf.Write(r.Record)
			for _, p := range r.Proof {
				buf.WriteByte('\t')
				buf.WriteString(base64.StdEncoding.EncodeToString(p[:]))
			}
			buf.WriteByte('\n')
		}
	}
	buf.WriteByte('\n')
	buf.Write(b.Checkpoint)
	return buf.Bytes(), nil
}

// ParseBundle parses the container (not the records inside, and it
// verifies nothing). Errors wrap ErrMalformedBundle.
func ParseBundle(data []byte) (*Bundle, error) {
	raw, err := splitBundle(data)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Header: raw.header, Checkpoint: raw.checkpoint}
	for i, l := range raw.records {
		r, err := parseRecordLine(l)
		if err != nil {
			return nil, fmt.Errorf("record line %d: %w", i, err)
		}
		b.Records = append(b.Records, r)
	}
	for i, l := range raw.keyRecords {
		r, err := parseRecordLine(l)
		if err != nil {
			return nil, fmt.Errorf("key record line %d: %w", i, err)
		}
		b.KeyRecords = append(b.KeyRecords, r)
	}
	return b, nil
}

type rawBundle struct {
	header     BundleHeader
	records    [][]byte // lines without tag and newline: record[\thash]*
	keyRecords [][]byte
	checkpoint []byte
}

func splitBundle(data []byte) (*rawBundle, error) {
	bad := func(why string) (*rawBundle, error) {
		return nil, fmt.Errorf("%w: %s", ErrMalformedBundle, why)
	}
	next := func() ([]byte, bool) {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil, false
		}
		l := data[:i]
		data = data[i+1:]
		return l, true
	}
	magic, ok := next()
	if !ok || string(magic) != BundleMagic {
		return bad("missing " + BundleMagic + " line")
	}
	hl, ok := next()
	if !ok {
		return bad("missing header")
	}
	var rb rawBundle
	// The header must be canonical JSON with exactly the field names of
	// BundleHeader, so that every JSON reader sees the same run and closed
	// claim (encoding/json alone would match "rUN" to "run" and let the
	// last duplicate win).
	if err := decodeJSON(hl, true, &rb.header); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrMalformedBundle, err)
	}
	if rb.header.V != BundleVersion {
		return bad(fmt.Sprintf("header v = %d, want %d", rb.header.V, BundleVersion))
	}
	// One pass over the data: counting the lines first to size
	// rb.records would read it all twice.
	inKeys := false
	for {
		l, ok := next()
		if !ok {
			return bad("missing blank line before checkpoint")
		}
		if len(l) == 0 {
			break
		}
		switch {
		case len(l) > 2 && l[0] == 'R' && l[1] == '\t':
			if inKeys {
				return bad("R line after K line")
			}
			rb.records = append(rb.records, l[2:])
		case len(l) > 2 && l[0] == 'K' && l[1] == '\t':
			inKeys = true
			rb.keyRecords = append(rb.keyRecords, l[2:])
		default:
			return bad("line is not R or K")
		}
	}
	rb.checkpoint = data
	return &rb, nil
}

func parseRecordLine(l []byte) (BundleRecord, error) {
	rec, proof, err := parseRecordLineInto(l, nil)
	if err != nil {
		return BundleRecord{}, err
	}
	return BundleRecord{Record: rec, Proof: proof}, nil
}

// parseRecordLineInto is parseRecordLine appending the proof to dst (which
// it allocates when nil and a proof is present).
func parseRecordLineInto(l []byte, dst tlog.RecordProof) ([]byte, tlog.RecordProof, error) {
	i := bytes.IndexByte(l, '\t')
	if i < 0 {
		return l, nil, nil
	}
	r := BundleRecord{Record: l[:i]}
	l = l[i+1:]
	// A tree of 2^63 leaves needs 63 proof hashes.
	n := bytes.Count(l, []byte{'\t'}) + 1
	if n > 63 {
		return nil, nil, fmt.Errorf("%w: proof has %d hashes", ErrMalformedBundle, n)
	}
	if dst == nil {
		dst = make(tlog.RecordProof, 0, n)
	}
	r.Proof = dst[:0]
	for len(l) > 0 || n > len(r.Proof) {
		f := l
		if j := bytes.IndexByte(l, '\t'); j >= 0 {
			f, l = l[:j], l[j+1:]
		} else {
			l = nil
		}
		var buf [tlog.HashSize + 1]byte
		if len(f) != 44 {
			return nil, nil, fmt.Errorf("%w: bad proof hash", ErrMalformedBundle)
		}
		if k, err := strictBase64.Decode(buf[:], f); err != nil || k != tlog.HashSize {
			return nil, nil, fmt.Errorf("%w: bad proof hash", ErrMalformedBundle)
		}
		r.Proof = append(r.Proof, tlog.Hash(buf[:tlog.HashSize]))
	}
	return r.Record, r.Proof, nil
}

// proofLines parses the record lines of one bundle section in turn, as
// parseRecordLineInto does, for the verifier's workers. Neighbouring records
// have audit paths that end in the same hashes, so a proof hash whose base64
// text equals the text at the same distance from the end of the previous
// line's proof is taken from that line's decoded proof instead of being
// decoded again: strict base64 gives every hash exactly one 44-character
// text, so equal text is an equal, valid hash. The proof parse returns is
// overwritten by the call after the next.
type proofLines struct {
	proofs [2][maxProof]tlog.Hash // decoded proofs of this line and the previous one
	cur    int                    // index in proofs of the line being parsed
	prev   []byte                 // proof text of the previous line, when it parsed
	prevN  int                    // number of hashes in prev
}

// proofText is the length of one base64 proof hash, without its tab.
const proofText = 44

func (pl *proofLines) parse(l []byte) ([]byte, tlog.RecordProof, error) {
	i := bytes.IndexByte(l, '\t')
	if i < 0 {
		return l, nil, nil
	}
	rec, text := l[:i], l[i+1:]
	n := bytes.Count(text, []byte{'\t'}) + 1
	if n > maxProof {
		return nil, nil, fmt.Errorf("%w: proof has %d hashes", ErrMalformedBundle, n)
	}
	// n-1 tabs, each right after a 44-character field, leave 44 characters
	// for the last field too.
	bad := len(text) != n*(proofText+1)-1
	for k := 0; k < n-1 && !bad; k++ {
		bad = text[k*(proofText+1)+proofText] != '\t'
	}
	if bad {
		return nil, nil, fmt.Errorf("%w: bad proof hash", ErrMalformedBundle)
	}
	proof, last := pl.proofs[pl.cur][:n], &pl.proofs[1-pl.cur]
	for k := range proof {
		f := text[k*(proofText+1):][:proofText]
		if pk := pl.prevN - n + k; pk >= 0 && string(f) == string(pl.prev[pk*(proofText+1):][:proofText]) {
			proof[k] = last[pk]
			continue
		}
		var buf [tlog.HashSize + 1]byte
		if m, err := strictBase64.Decode(buf[:], f); err != nil || m != tlog.HashSize {
			return nil, nil, fmt.Errorf("%w: bad proof hash", ErrMalformedBundle)
		}
		proof[k] = tlog.Hash(buf[:tlog.HashSize])
	}
	pl.prev, pl.prevN, pl.cur = text, n, 1-pl.cur
	return rec, proof, nil
}
