// Package memory keeps what an agent must not lose when its sandbox is
// thrown away: memories (short texts recalled by keyword) and working state
// (named JSON values guarded by leases).
//
// Everything lives in a namespace, the pair (tenant, agent): the sandbox's
// Kubernetes namespace and its SandboxClaim's name, both taken from the
// caller's key ([apikey.Identity]). A caller acts only in its own
// namespace: every [Service] method first compares the namespace it is
// asked for with the caller's identity and fails with
// [ErrNamespaceMismatch] before the [Store] is touched. The session (the
// pod's name) is recorded on every write.
//
// # Memories
//
// A memory is {kind, key?, text, tags?}. Remembering the same kind, key and
// text as an active memory stores nothing and answers "unchanged". A memory
// with a non-empty key supersedes the active memory of the same kind and
// key whose text differs ("superseded"); the old one is kept as history,
// listed by recall with history=true. Recall is keyword search over the
// terms of internal/memory/terms (case and diacritics folded, every CJK
// character its own token), ranked by BM25 in SQLite (FTS5) or ts_rank in
// PostgreSQL, then newest first; an empty query lists the
// newest memories. Text is stored and returned byte for byte, never
// truncated: over [Options.MaxTextBytes] it is refused with a
// [*TooLargeError].
//
// # Working state and leases
//
// A state slot is a named JSON value with a version: 0 before its first
// write, then +1 on every write. Writing requires a lease: exclusive,
// expiring ownership of the slot by one session. Each new holder of a slot
// gets the next epoch (epochs never decrease, even across releases); a
// renewal by the same session keeps its epoch. A write names its lease
// epoch and the version it expects, and the store checks both in the same
// transaction as the write, so a pod whose lease has passed to another is
// fenced off ([ErrLeaseLost]) and a write based on stale state is refused
// ([ErrVersionConflict]). A lease held by a pod that no longer exists
// ([Options.HolderAlive]) may be taken over at once, and such a pod is
// granted no lease ([ErrHolderGone]): its key outlives it, and it would
// otherwise take the next epoch once its successor releases the slot or
// lets the lease lapse.
//
// A state value is stored and read byte for byte, over HTTP and MCP
// alike, so both accept the same values: one I-JSON value (RFC 7493:
// valid UTF-8, no unpaired surrogate escape, no member name twice in an
// object), numbers within float64's range (any precision), arrays and
// objects nested at most 100 deep; anything else is [ErrInvalid].
//
// # HTTP
//
// [Service.Handler] serves, behind apikey's Middleware:
//
//	POST   /v1/memory/{tenant}/{agent}/memories            {kind, key?, text, tags?} -> 201 | 200
//	GET    /v1/memory/{tenant}/{agent}/memories?q=&kind=&limit=&history=
//	DELETE /v1/memory/{tenant}/{agent}/memories/{id}       -> 204
//	GET    /v1/memory/{tenant}/{agent}/state/{name}
//	PUT    /v1/memory/{tenant}/{agent}/state/{name}        Lease-Epoch, If-Match -> 200
//	POST   /v1/memory/{tenant}/{agent}/state/{name}/lease  {ttl_seconds?} -> 200
//	DELETE /v1/memory/{tenant}/{agent}/state/{name}/lease  Lease-Epoch -> 204
//
// Errors are apierror bodies; [HTTPStatusFor] and [ErrorCode] give their
// status and code. [Service.MCPHandler] serves the same operations as MCP
// tools.
package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// Sentinel errors. Test them with errors.Is; [HTTPStatusFor] maps them to
// status codes and [ErrorCode] to the wire "error" code.
var (
	// ErrNamespaceMismatch: the caller's key is for another tenant or
	// agent than the namespace asked for. 403 namespace_mismatch.
	ErrNamespaceMismatch = errors.New("namespace does not match the caller's key")
	// ErrHolderGone: [Options.HolderAlive] reports the caller's own pod
	// gone (deleted, terminating, or re-created under its name), so it is
	// granted no lease. 403 holder_gone.
	ErrHolderGone = errors.New("the caller's pod no longer exists")
	// ErrNotFound: no such memory in this namespace, or the state slot
	// has never been written. 404 not_found.
	ErrNotFound = errors.New("not found")
	// ErrLeaseHeld: another live session holds an unexpired lease on the
	// slot. Returned as a [*LeaseHeldError]. 409 lease_held.
	ErrLeaseHeld = errors.New("lease held by another session")
	// ErrLeaseLost: the caller does not hold an unexpired lease with the
	// epoch it named. 409 lease_lost.
	ErrLeaseLost = errors.New("lease lost")
	// ErrVersionConflict: the slot's version is not the one the caller
	// expected. Returned as a [*VersionConflictError]. 412
	// version_conflict.
	ErrVersionConflict = errors.New("version conflict")
	// ErrTooLarge: a text or state value is over its limit. Returned as a
	// [*TooLargeError]. 413 too_large.
	ErrTooLarge = errors.New("too large")
	// ErrInvalid: a malformed request (bad kind, name, JSON, header...).
	// 400 bad_request.
	ErrInvalid = errors.New("invalid request")
	// ErrPreconditionRequired: a write without If-Match. It wraps
	// [ErrInvalid]. 428 precondition_required.
	ErrPreconditionRequired = fmt.Errorf("%w: If-Match is required", ErrInvalid)
)

// TooLargeError is an [ErrTooLarge] that carries the limit that was
// exceeded.
type TooLargeError struct {
	// What is too large: "text" or "state".
	What string
	// Limit is the largest accepted size in bytes.
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is over the limit of %d bytes", e.What, e.Limit)
}

// Unwrap returns [ErrTooLarge].
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// LeaseHeldError is an [ErrLeaseHeld] that says who holds the lease.
type LeaseHeldError struct {
	// Lease is the lease that is held. Only its Holder session and
	// ExpiresAt are shown to the caller.
	Lease Lease
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease held by session %q until %s", e.Lease.Holder, e.Lease.ExpiresAt.Format(time.RFC3339))
}

// Unwrap returns [ErrLeaseHeld].
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// VersionConflictError is an [ErrVersionConflict] that carries the slot's
// current version.
type VersionConflictError struct {
	Current int64
}

func (e *VersionConflictError) Error() string {
	return fmt.Sprintf("version conflict: current version is %d", e.Current)
}

// Unwrap returns [ErrVersionConflict].
func (e *VersionConflictError) Unwrap() error { return ErrVersionConflict }

// HTTPStatusFor maps an error from this package to an HTTP status: 400,
// 403, 404, 409, 412, 413, 428, or 500 for anything else (a store
// failure).
func HTTPStatusFor(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrNamespaceMismatch), errors.Is(err, ErrHolderGone):
		return http.StatusForbidden
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrLeaseHeld), errors.Is(err, ErrLeaseLost):
		return http.StatusConflict
	case errors.Is(err, ErrVersionConflict):
		return http.StatusPreconditionFailed
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrPreconditionRequired):
		return http.StatusPreconditionRequired
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// ErrorCode maps an error from this package to the wire "error" code:
// namespace_mismatch, holder_gone, not_found, lease_held, lease_lost, version_conflict,
// too_large, precondition_required, bad_request, or internal.
func ErrorCode(err error) string {
	switch {
	case errors.Is(err, ErrNamespaceMismatch):
		return "namespace_mismatch"
	case errors.Is(err, ErrHolderGone):
		return "holder_gone"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrLeaseHeld):
		return "lease_held"
	case errors.Is(err, ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, ErrVersionConflict):
		return "version_conflict"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, ErrPreconditionRequired):
		return "precondition_required"
	case errors.Is(err, ErrInvalid):
		return "bad_request"
	default:
		return "internal"
	}
}

// Namespace is where memories and state live: the sandbox's tenant and
// the agent (SandboxClaim name).
type Namespace struct {
	Tenant string
	Agent  string
}

// Status says what remembering did.
type Status string

// Remember statuses.
const (
	// StatusCreated: a new memory was stored (201).
	StatusCreated Status = "created"
	// StatusUnchanged: the same kind, key and text is already active;
	// nothing was stored (200).
	StatusUnchanged Status = "unchanged"
	// StatusSuperseded: a new memory was stored and replaced the active
	// one with the same kind and key (200).
	StatusSuperseded Status = "superseded"
)

// Memory is one remembered text. Its JSON form is the wire format.
type Memory struct {
	// ID is opaque (16 lowercase hex digits in both stores), unique
	// across namespaces.
	ID string `json:"id"`
	// Kind matches ^[a-z][a-z0-9_]{0,31}$, for example "preference".
	Kind string `json:"kind"`
	// Key, if not empty, names what the memory is about; a newer memory
	// with the same kind and key supersedes it. At most 256 bytes.
	Key string `json:"key,omitempty"`
	// Text is the memory, byte for byte as remembered (valid UTF-8).
	Text string `json:"text"`
	// Tags are free labels, at most 16 of at most 64 bytes each.
	Tags []string `json:"tags,omitempty"`
	// Session is the pod that remembered it.
	Session string `json:"session"`
	// CreatedAt has millisecond resolution.
	CreatedAt time.Time `json:"created_at"`
	// SupersededBy is the ID of the memory that replaced this one, empty
	// while it is active.
	SupersededBy string `json:"superseded_by,omitempty"`
	// SupersededAt is when it was replaced; zero while active.
	SupersededAt time.Time `json:"superseded_at,omitzero"`
}

// RememberRequest is the body of POST .../memories.
type RememberRequest struct {
	Kind string   `json:"kind"`
	Key  string   `json:"key,omitempty"`
	Text string   `json:"text"`
	Tags []string `json:"tags,omitempty"`
}

// Remembered is the result of remembering, and the response body.
type Remembered struct {
	// ID of the stored memory (the existing one when unchanged).
	ID     string `json:"id"`
	Status Status `json:"status"`
	Memory Memory `json:"memory"`
	// Supersedes is the ID of the memory this one replaced
	// (StatusSuperseded only).
	Supersedes string `json:"supersedes,omitempty"`
}

// Query selects memories to recall.
type Query struct {
	// Text is the keyword query: whitespace-separated terms, any of which
	// may match; a term is matched as a phrase of its tokens. Empty lists
	// the newest memories.
	Text string
	// Kind, if not empty, restricts results to that kind.
	Kind string
	// Limit is the most results to return, 1 to 100.
	Limit int
	// History includes superseded memories.
	History bool
}

// Lease is a session's exclusive, expiring ownership of a state slot.
type Lease struct {
	// Epoch is the fencing token: it grows by one for every new holder of
	// the slot.
	Epoch int64 `json:"epoch"`
	// Holder is the holder's session (pod name).
	Holder string `json:"holder"`
	// ExpiresAt has millisecond resolution.
	ExpiresAt time.Time `json:"expires_at"`
	// HolderIdentity is the holder's full identity, given to
	// [Options.HolderAlive]. Never sent to clients.
	HolderIdentity apikey.Identity `json:"-"`
}

// State is a working-state slot, and the body of GET and PUT .../state/{name}.
type State struct {
	Name string `json:"name"`
	// Version is 0 before the first write, then counts writes.
	Version int64 `json:"version"`
	// Value is the JSON value last written (null at version 0).
	Value json.RawMessage `json:"state"`
	// UpdatedAt and UpdatedBy (a session) describe the last write; zero
	// and empty at version 0.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by,omitempty"`
	// Lease is the current lease, nil if there is none (a store may
	// return an expired one; [Service] drops it).
	Lease *Lease `json:"lease,omitempty"`
}

// Grant is a granted lease with the slot's current content: the body of
// POST .../state/{name}/lease.
type Grant struct {
	Name      string          `json:"name"`
	Epoch     int64           `json:"epoch"`
	ExpiresAt time.Time       `json:"expires_at"`
	Version   int64           `json:"version"`
	Value     json.RawMessage `json:"state"`
}

// AnyVersion as [PutRequest.IfVersion] accepts any current version
// (If-Match: *).
const AnyVersion int64 = -1

// LeaseRequest asks a [Store] for a lease.
type LeaseRequest struct {
	// Holder is the caller, identified by [HolderKey].
	Holder apikey.Identity
	// TTL is how long the lease lasts from Now.
	TTL time.Duration
	// Now is the current time; a lease expiring at or before Now is
	// expired.
	Now time.Time
	// TakeOver, if not 0, is the epoch of an unexpired lease whose holder
	// is known to be gone: the store grants the lease if the slot's lease
	// is still that epoch.
	TakeOver int64
}

// HolderKey identifies one lease holder: a pod incarnation, that is its
// session (pod name) and pod UID. A pod re-created under the same name
// is another holder, so it gets a new epoch and the old incarnation's
// writes are fenced off. Identities without a pod UID (the static method)
// are identified by session alone.
func HolderKey(id apikey.Identity) string {
	if id.PodUID == "" {
		return id.Session
	}
	return id.Session + "/" + id.PodUID
}

// PutRequest asks a [Store] to write a state slot.
type PutRequest struct {
	// Holder is the writer, who must hold the lease (compared by
	// [HolderKey]); its Session is recorded as UpdatedBy.
	Holder apikey.Identity
	// Epoch is the lease epoch the writer holds.
	Epoch int64
	// IfVersion is the version the writer expects, or [AnyVersion].
	IfVersion int64
	// Value is valid JSON.
	Value json.RawMessage
	// Now is the current time (lease expiry and UpdatedAt).
	Now time.Time
}

// Store persists memories and working state.
//
// Implementations must be safe for concurrent use, and every method is
// atomic: its reads and writes happen in one transaction, serialized
// against every other write to the same namespace (SQLite: BEGIN
// IMMEDIATE). Results are durable when a method returns. A store never
// sees a namespace the caller is not allowed in; it still scopes every
// read and write to the namespace it is given.
type Store interface {
	// RememberMemory stores m (ID unset; Kind, Key, Text, Tags, Session,
	// CreatedAt set) in ns. If an active memory with the same Kind, Key
	// and Text exists (Tags are not compared) it returns that memory with
	// [StatusUnchanged] and stores nothing. Otherwise, if Key is not empty and an active memory
	// has the same Kind and Key, that memory is marked superseded by the
	// new one (SupersededBy, SupersededAt = m.CreatedAt) and the result is
	// [StatusSuperseded] with Supersedes set; else [StatusCreated]. At
	// most one memory per (Kind, non-empty Key) is active.
	RememberMemory(ctx context.Context, ns Namespace, m Memory) (Remembered, error)
	// RecallMemories returns up to q.Limit memories of ns matching q
	// (see [Query]), best match first (BM25 in SQLite, ts_rank in
	// PostgreSQL), then newest; for an empty
	// q.Text, newest first. Active memories only unless q.History. A
	// query with no searchable term matches nothing. Query text is never
	// interpreted as search syntax.
	RecallMemories(ctx context.Context, ns Namespace, q Query) ([]Memory, error)
	// ForgetMemory deletes memory id of ns. It returns [ErrNotFound] if
	// ns holds no memory with that ID (including a malformed ID).
	ForgetMemory(ctx context.Context, ns Namespace, id string) error
	// GetWorkingState returns slot name of ns, including one at version
	// 0 that only has (or had) a lease, with its lease if one is recorded
	// (possibly expired). It returns [ErrNotFound] if the slot was never
	// leased nor written.
	GetWorkingState(ctx context.Context, ns Namespace, name string) (State, error)
	// AcquireStateLease grants r.Holder a lease on slot name of ns until
	// r.Now+r.TTL, creating the slot at version 0 if needed. The lease is
	// renewed (same epoch) if r.Holder (by [HolderKey]) holds it unexpired;
	// granted with epoch+1 if there is no lease, it is expired, or its
	// epoch is r.TakeOver; otherwise it fails with a [*LeaseHeldError]
	// carrying the current lease.
	AcquireStateLease(ctx context.Context, ns Namespace, name string, r LeaseRequest) (Grant, error)
	// PutWorkingState writes r.Value to slot name of ns and increments its
	// version, checking in the same transaction first that r.Holder
	// (by [HolderKey]) holds an unexpired lease with epoch r.Epoch, else [ErrLeaseLost];
	// then that the version is r.IfVersion (unless [AnyVersion]), else a
	// [*VersionConflictError]. It returns the slot after the write.
	PutWorkingState(ctx context.Context, ns Namespace, name string, r PutRequest) (State, error)
	// ReleaseStateLease ends the lease on slot name of ns if holder (by
	// [HolderKey]) holds it with epoch (expired or not), else
	// [ErrLeaseLost]. The epoch is kept, so the next holder gets epoch+1.
	ReleaseStateLease(ctx context.Context, ns Namespace, name string, holder apikey.Identity, epoch int64) error
}

// HolderAliveFunc tells whether the pod that holds a lease still exists
// (for example by getting the pod holder.Session in namespace
// holder.Tenant and comparing its UID with holder.PodUID). An error is
// treated as "alive": the lease is not taken over.
type HolderAliveFunc func(ctx context.Context, holder apikey.Identity) (bool, error)

// Options configure a [Service]. The zero value of each field means its
// default.
type Options struct {
	// Store is required.
	Store Store
	// HolderAlive lets a lease whose holder pod is gone be taken over
	// before it expires, and refuses a lease to a caller whose own pod is
	// gone ([ErrHolderGone]); it is asked about the caller on every lease
	// request (a renewal too), an error counting as alive. Default nil:
	// every lease runs to its expiry, and every caller may lease.
	HolderAlive HolderAliveFunc
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Log receives errors and lease takeovers, never texts, state or
	// keys. Default slog.Default().
	Log *slog.Logger
	// MaxTextBytes bounds a memory's text. Default 16 KiB.
	MaxTextBytes int
	// MaxStateBytes bounds a state value (the JSON body). Default 1 MiB.
	MaxStateBytes int
	// DefaultLeaseTTL is a lease's lifetime when the caller names none.
	// Default 5 minutes.
	DefaultLeaseTTL time.Duration
	// MaxLeaseTTL is the longest lease a caller may ask for; longer
	// requests are refused with [ErrInvalid]. Default 1 hour.
	MaxLeaseTTL time.Duration
	// RecallTimeout bounds one recall's search in the store; a search
	// still running then is stopped and refused with [ErrInvalid]. Words
	// that repeat throughout long memories, in many phrases, can take
	// the store seconds of CPU per recall within the query limits.
	// Default 2 s.
	RecallTimeout time.Duration
}

// Service implements the memory operations over a [Store]. It is safe for
// concurrent use.
type Service struct {
	store       Store
	holderAlive HolderAliveFunc
	now         func() time.Time
	log         *slog.Logger
	maxText     int
	maxState    int
	defaultTTL  time.Duration
	maxTTL      time.Duration
	recallLimit time.Duration
}

// New validates opts, fills in defaults and returns a Service.
func New(opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("memory: Store is required")
	}
	if opts.MaxTextBytes < 0 || opts.MaxStateBytes < 0 {
		return nil, fmt.Errorf("memory: negative size limit (text %d, state %d)", opts.MaxTextBytes, opts.MaxStateBytes)
	}
	if opts.RecallTimeout < 0 {
		return nil, fmt.Errorf("memory: negative RecallTimeout %v", opts.RecallTimeout)
	}
	if opts.RecallTimeout == 0 {
		opts.RecallTimeout = 2 * time.Second
	}
	if opts.DefaultLeaseTTL < 0 || opts.MaxLeaseTTL < 0 {
		return nil, fmt.Errorf("memory: negative lease TTL (default %v, max %v)", opts.DefaultLeaseTTL, opts.MaxLeaseTTL)
	}
	if opts.MaxTextBytes == 0 {
		opts.MaxTextBytes = 16 << 10
	}
	if opts.MaxStateBytes == 0 {
		opts.MaxStateBytes = 1 << 20
	}
	if opts.DefaultLeaseTTL == 0 {
		opts.DefaultLeaseTTL = 5 * time.Minute
	}
	if opts.MaxLeaseTTL == 0 {
		opts.MaxLeaseTTL = time.Hour
	}
	if opts.DefaultLeaseTTL > opts.MaxLeaseTTL {
		return nil, fmt.Errorf("memory: DefaultLeaseTTL %v is over MaxLeaseTTL %v", opts.DefaultLeaseTTL, opts.MaxLeaseTTL)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Service{
		store:       opts.Store,
		holderAlive: opts.HolderAlive,
		now:         opts.Now,
		log:         opts.Log.With("service", "memory"),
		maxText:     opts.MaxTextBytes,
		maxState:    opts.MaxStateBytes,
		defaultTTL:  opts.DefaultLeaseTTL,
		maxTTL:      opts.MaxLeaseTTL,
		recallLimit: opts.RecallTimeout,
	}, nil
}
