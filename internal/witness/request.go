package witness

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"
)

const (
	// MaxRequestSize is the largest add-checkpoint request body, in bytes,
	// the witness reads.
	MaxRequestSize = 64 << 10
	// MaxProofHashes is the most consistency proof lines a request may
	// carry (C2SP tlog-witness: no more than 63).
	MaxProofHashes = 63
)

// AddCheckpointRequest is the body of a C2SP tlog-witness add-checkpoint
// request. See the package doc, # Format.
type AddCheckpointRequest struct {
	// OldSize is the tree size of the latest checkpoint the caller believes
	// the witness cosigned; 0 if none.
	OldSize int64
	// Proof is the RFC 6962 consistency proof from OldSize to the
	// checkpoint's size; empty if OldSize is 0 or equals the size.
	Proof tlog.TreeProof
	// Checkpoint is the signed note, verbatim, to the end of the body.
	Checkpoint []byte
}

// Marshal returns the request body:
//
//	old <OldSize>\n<base64 hash>\n…\n<signed checkpoint>
func (r AddCheckpointRequest) Marshal() ([]byte, error) {
	if r.OldSize < 0 || len(r.Proof) > MaxProofHashes || len(r.Checkpoint) == 0 {
		return nil, fmt.Errorf("%w: negative old size, too long a proof or no checkpoint", ErrMalformed)
	}
	b := make([]byte, 0, 16+len(r.Proof)*45+1+len(r.Checkpoint))
	b = append(b, "old "...)
	b = strconv.AppendInt(b, r.OldSize, 10)
	b = append(b, '\n')
	for _, h := range r.Proof {
		b = base64.StdEncoding.AppendEncode(b, h[:])
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, r.Checkpoint...), nil
}

// ParseAddCheckpointRequest parses an add-checkpoint request body strictly:
// the old size in decimal without leading zeros, at most [MaxProofHashes]
// proof lines of exactly one 32-byte hash in padded standard base64, an
// empty line, and a non-empty checkpoint. It does not look inside the
// checkpoint. Errors wrap [ErrMalformed].
func ParseAddCheckpointRequest(body []byte) (AddCheckpointRequest, error) {
	bad := func(why string) (AddCheckpointRequest, error) {
		return AddCheckpointRequest{}, fmt.Errorf("%w: %s", ErrMalformed, why)
	}
	if len(body) > MaxRequestSize {
		return bad("body too large")
	}
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return bad("no old size line")
	}
	num, ok := bytes.CutPrefix(line, []byte("old "))
	if !ok {
		return bad(`first line is not "old <size>"`)
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != string(num) {
		return bad("invalid old size")
	}
	r := AddCheckpointRequest{OldSize: n}
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return bad("no empty line before the checkpoint")
		}
		if len(line) == 0 {
			break
		}
		if len(r.Proof) == MaxProofHashes {
			return bad("too many consistency proof lines")
		}
		var buf [tlog.HashSize + 1]byte // DecodedLen(44) is 33
		if len(line) != base64.StdEncoding.EncodedLen(tlog.HashSize) {
			return bad("invalid consistency proof line")
		}
		if m, err := base64.StdEncoding.Strict().Decode(buf[:], line); err != nil || m != tlog.HashSize {
			return bad("invalid consistency proof line")
		}
		r.Proof = append(r.Proof, tlog.Hash(buf[:tlog.HashSize]))
	}
	if len(rest) == 0 {
		return bad("no checkpoint")
	}
	r.Checkpoint = rest
	return r, nil
}
