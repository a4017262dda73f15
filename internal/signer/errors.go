package signer

import (
	"errors"
	"net/http"
)

// Sentinel errors, tested with errors.Is. [HTTPStatusFor] and [ErrorCode]
// map them to the HTTP status and the apierror code.
var (
	// ErrNotFound: no such run, call, approval or stored row (404 not_found).
	ErrNotFound = errors.New("not found")
	// ErrForbidden: the run belongs to another tenant or agent (403 forbidden).
	ErrForbidden = errors.New("run belongs to another agent")
	// ErrRunClosed: a call on a closed run; it was refused and recorded in
	// the run "_log" (409 run_closed).
	ErrRunClosed = errors.New("run is closed")
	// ErrTooManyRuns refuses a run past Options.MaxOpenRuns for its agent.
	ErrTooManyRuns = errors.New("too many open runs for this agent")
	// ErrInvalid: a malformed request (400 bad_request).
	ErrInvalid = errors.New("invalid request")
	// ErrDuplicateCall: a call id already decided in this run (409 duplicate_call).
	ErrDuplicateCall = errors.New("call id already decided")
	// ErrApproval is the parent of the approval refusals below; each
	// refusal is recorded as approval.refused in the run.
	ErrApproval = errors.New("approval refused")
	// ErrApprovalNotAsk: the call was not decided ask, or the approval
	// request's tool or args are not the decided call's (409 not_ask).
	ErrApprovalNotAsk = errorsJoin("call was not decided ask with these args", ErrApproval)
	// ErrApprovalPending: not yet approved (409 approval_pending).
	ErrApprovalPending = errorsJoin("approval is pending", ErrApproval)
	// ErrApprovalDenied: an operator denied it (409 approval_denied).
	ErrApprovalDenied = errorsJoin("approval was denied", ErrApproval)
	// ErrApprovalConsumed: consumed before (409 approval_consumed).
	ErrApprovalConsumed = errorsJoin("approval already consumed", ErrApproval)
	// ErrApprovalExpired: past its expiry (410 approval_expired).
	ErrApprovalExpired = errorsJoin("approval expired", ErrApproval)
	// ErrArgsMismatch: the args are not those the approval is bound to
	// (409 args_mismatch).
	ErrArgsMismatch = errorsJoin("args differ from the approved args", ErrApproval)
	// ErrLogRollback: a witness has cosigned a larger tree than the signer
	// holds, or answered that the log forked; writes are refused until an
	// operator acts (503 log_rollback).
	ErrLogRollback = errors.New("log rollback detected: writes refused")
	// ErrLogConflict: the store refused a batch that does not extend the
	// log it holds (another writer, such as a second replica on the same
	// database, appended to it) or whose writer lease was taken over.
	// Store.AppendBatch returns it wrapped; the signer then refuses writes
	// until it is restarted, never retrying with its stale state (503
	// log_conflict).
	ErrLogConflict = errors.New("another writer appended to the log")
	// ErrClosed: the signer is shutting down (503 unavailable).
	ErrClosed = errors.New("signer closed")
	// ErrRotationRefused: key rotation is not possible here, e.g. the key
	// is shared by several replicas (409 rotation_refused).
	ErrRotationRefused = errors.New("key rotation refused")
)

type wrapped struct {
	msg    string
	parent error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.parent }

func errorsJoin(msg string, parent error) error { return &wrapped{msg, parent} }

// HTTPStatusFor maps an error of this package to an HTTP status; unknown
// errors are 503 (the store is unavailable).
func HTTPStatusFor(err error) int {
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrApprovalExpired):
		return http.StatusGone
	case errors.Is(err, ErrTooManyRuns):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrRunClosed), errors.Is(err, ErrDuplicateCall), errors.Is(err, ErrApproval), errors.Is(err, ErrRotationRefused):
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}

// ErrorCode maps an error of this package to its apierror code.
func ErrorCode(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{
		{ErrNotFound, "not_found"}, {ErrForbidden, "forbidden"}, {ErrInvalid, "bad_request"},
		{ErrRunClosed, "run_closed"}, {ErrTooManyRuns, "too_many_runs"}, {ErrDuplicateCall, "duplicate_call"},
		{ErrApprovalNotAsk, "not_ask"}, {ErrApprovalPending, "approval_pending"},
		{ErrApprovalDenied, "approval_denied"}, {ErrApprovalConsumed, "approval_consumed"},
		{ErrApprovalExpired, "approval_expired"}, {ErrArgsMismatch, "args_mismatch"},
		{ErrLogRollback, "log_rollback"}, {ErrLogConflict, "log_conflict"}, {ErrRotationRefused, "rotation_refused"},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "unavailable"
}
