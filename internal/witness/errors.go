package witness

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors of add-checkpoint. The server maps them to HTTP status
// codes with [HTTPStatusFor]; the [Client] maps status codes back to them, so
// callers on both sides test with errors.Is.
var (
	// ErrMalformed: the request body, proof or checkpoint does not parse,
	// or the old size exceeds the checkpoint size. 400 Bad Request.
	ErrMalformed = errors.New("malformed add-checkpoint request")
	// ErrUnknownLog: the checkpoint's origin is not a log the witness
	// follows. 404 Not Found.
	ErrUnknownLog = errors.New("unknown log origin")
	// ErrBadSignature: no signature by a trusted key of the log verifies,
	// or a signature by a trusted key is invalid. 403 Forbidden.
	ErrBadSignature = errors.New("no valid log signature on checkpoint")
	// ErrConflict: the old size is not the size of the latest tree the
	// witness cosigned for the log. 409 Conflict with the witness's size;
	// returned as a [*ConflictError].
	ErrConflict = errors.New("old size is not the witness's latest size")
	// ErrFork: the checkpoint has the size of the latest cosigned tree but
	// a different root hash — the log has forked. 409 Conflict.
	ErrFork = errors.New("checkpoint root differs from the cosigned root at the same size")
	// ErrBadProof: the consistency proof (RFC 6962 §2.1.2) from the
	// witness's tree to the checkpoint's does not verify. 422.
	ErrBadProof = errors.New("consistency proof does not verify")
)

// ConflictError reports that the witness's latest cosigned tree for the log
// has Size leaves, not the old size the caller claimed. It wraps
// [ErrConflict]. A Size larger than the caller's own tree means the witness
// has cosigned a tree the caller no longer holds (a rollback).
type ConflictError struct {
	Size int64 // tree size of the witness's latest cosigned checkpoint
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: witness is at size %d", ErrConflict, e.Size)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// WitnessTreeSize returns Size; it is what the signer's default
// Options.WitnessSize looks for.
func (e *ConflictError) WitnessTreeSize() int64 { return e.Size }

// ResponseError is a non-200 answer from a witness other than a size
// conflict. It wraps the sentinel its status code stands for, if any.
type ResponseError struct {
	StatusCode int
	Body       string // the response body, at most 1 KiB, for diagnostics
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("witness answered %d %s: %q", e.StatusCode, http.StatusText(e.StatusCode), e.Body)
}

// WitnessFork reports whether the answer says the caller's log forked from
// the tree the witness cosigned: [ErrFork] (409 without a size: same size,
// another root) or [ErrBadProof] (422: the consistency proof from the
// witness's tree does not verify). It is what the signer's default
// Options.WitnessFork looks for.
func (e *ResponseError) WitnessFork() bool {
	return e.StatusCode == http.StatusConflict || e.StatusCode == http.StatusUnprocessableEntity
}

func (e *ResponseError) Unwrap() error {
	switch e.StatusCode {
	case http.StatusBadRequest:
		return ErrMalformed
	case http.StatusNotFound:
		return ErrUnknownLog
	case http.StatusForbidden:
		return ErrBadSignature
	case http.StatusConflict:
		return ErrFork
	case http.StatusUnprocessableEntity:
		return ErrBadProof
	}
	return nil
}

// HTTPStatusFor returns the C2SP tlog-witness status code for an error of
// [Witness.AddCheckpoint]; 500 for any other error.
func HTTPStatusFor(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownLog):
		return http.StatusNotFound
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrConflict), errors.Is(err, ErrFork):
		return http.StatusConflict
	case errors.Is(err, ErrBadProof):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}
