package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory/terms"
)

// Limits on request fields.
const (
	maxKeyBytes    = 256
	maxTags        = 16
	maxTagBytes    = 64
	maxQueryBytes  = 1024
	maxQueryTerms  = 32
	defaultLimit   = 10
	maxLimit       = 100
	maxNameBytes   = 128
	maxIDBytes     = 64
	maxHeaderBytes = 32
)

var (
	kindRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	// nameRE is a state slot name: a safe path segment.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// checkNamespace refuses a caller whose key is not for ns.
func checkNamespace(caller apikey.Identity, ns Namespace) error {
	if caller.Tenant == "" || caller.Agent == "" || caller.Tenant != ns.Tenant || caller.Agent != ns.Agent {
		return ErrNamespaceMismatch
	}
	return nil
}

func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return invalid("state name must match %s", nameRE)
	}
	return nil
}

func (s *Service) checkMemory(req RememberRequest) error {
	if !kindRE.MatchString(req.Kind) {
		return invalid("kind must match %s", kindRE)
	}
	if len(req.Key) > maxKeyBytes || !utf8.ValidString(req.Key) {
		return invalid("key must be valid UTF-8 of at most %d bytes", maxKeyBytes)
	}
	if len(req.Tags) > maxTags {
		return invalid("at most %d tags", maxTags)
	}
	for _, t := range req.Tags {
		if t == "" || len(t) > maxTagBytes || !utf8.ValidString(t) {
			return invalid("each tag must be valid UTF-8 of 1 to %d bytes", maxTagBytes)
		}
	}
	if strings.TrimSpace(req.Text) == "" {
		return invalid("text is required")
	}
	if !utf8.ValidString(req.Text) {
		return invalid("text must be valid UTF-8")
	}
	if len(req.Text) > s.maxText {
		return &TooLargeError{What: "text", Limit: int64(s.maxText)}
	}
	return nil
}

// Remember stores a memory in ns on behalf of caller (see [Store]
// RememberMemory for dedup and supersede rules). It fails with
// [ErrNamespaceMismatch], [ErrInvalid], a [*TooLargeError] for text over
// MaxTextBytes, or a store error.
func (s *Service) Remember(ctx context.Context, caller apikey.Identity, ns Namespace, req RememberRequest) (Remembered, error) {
	if err := checkNamespace(caller, ns); err != nil {
		return Remembered{}, err
	}
	if err := s.checkMemory(req); err != nil {
		return Remembered{}, err
	}
	m := Memory{
		Kind:      req.Kind,
		Key:       req.Key,
		Text:      req.Text,
		Tags:      slices.Clone(req.Tags),
		Session:   caller.Session,
		CreatedAt: s.now().UTC().Truncate(time.Millisecond),
	}
	r, err := s.store.RememberMemory(ctx, ns, m)
	if err != nil {
		return Remembered{}, fmt.Errorf("memory: remember: %w", err)
	}
	s.log.DebugContext(ctx, "memory remembered", "tenant", ns.Tenant, "agent", ns.Agent,
		"session", caller.Session, "id", r.ID, "status", r.Status, "supersedes", r.Supersedes)
	return r, nil
}

// Recall returns memories of ns matching q. q.Limit 0 means 10; over 100
// means 100. It fails with [ErrNamespaceMismatch], [ErrInvalid] (a query
// over 1024 bytes or 32 terms, a bad kind, a negative limit, a search
// that ran over Options.RecallTimeout), or a store error. The result is
// never nil.
func (s *Service) Recall(ctx context.Context, caller apikey.Identity, ns Namespace, q Query) ([]Memory, error) {
	if err := checkNamespace(caller, ns); err != nil {
		return nil, err
	}
	if len(q.Text) > maxQueryBytes || !utf8.ValidString(q.Text) {
		return nil, invalid("q must be valid UTF-8 of at most %d bytes", maxQueryBytes)
	}
	// Counted as the stores search them: fields between white space or
	// control characters.
	if len(terms.Query(q.Text)) > maxQueryTerms {
		return nil, invalid("q has more than %d terms", maxQueryTerms)
	}
	if q.Kind != "" && !kindRE.MatchString(q.Kind) {
		return nil, invalid("kind must match %s", kindRE)
	}
	switch {
	case q.Limit < 0:
		return nil, invalid("limit must be 1 to %d", maxLimit)
	case q.Limit == 0:
		q.Limit = defaultLimit
	case q.Limit > maxLimit:
		q.Limit = maxLimit
	}
	sctx, cancel := context.WithTimeout(ctx, s.recallLimit)
	defer cancel()
	ms, err := s.store.RecallMemories(sctx, ns, q)
	if err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
		return nil, invalid("the search took over %v and was stopped: use fewer words, or rarer ones", s.recallLimit)
	}
	if err != nil {
		return nil, fmt.Errorf("memory: recall: %w", err)
	}
	if ms == nil {
		ms = []Memory{}
	}
	return ms, nil
}

// Forget deletes memory id of ns. It fails with [ErrNamespaceMismatch],
// [ErrNotFound] (no such memory in ns), or a store error.
func (s *Service) Forget(ctx context.Context, caller apikey.Identity, ns Namespace, id string) error {
	if err := checkNamespace(caller, ns); err != nil {
		return err
	}
	if id == "" || len(id) > maxIDBytes {
		return ErrNotFound
	}
	if err := s.store.ForgetMemory(ctx, ns, id); err != nil {
		return fmt.Errorf("memory: forget: %w", err)
	}
	s.log.DebugContext(ctx, "memory forgotten", "tenant", ns.Tenant, "agent", ns.Agent, "session", caller.Session, "id", id)
	return nil
}

// State returns slot name of ns with its current lease, if any. It fails
// with [ErrNamespaceMismatch], [ErrInvalid] (bad name), [ErrNotFound] (never
// written), or a store error.
func (s *Service) State(ctx context.Context, caller apikey.Identity, ns Namespace, name string) (State, error) {
	if err := checkNamespace(caller, ns); err != nil {
		return State{}, err
	}
	if err := checkName(name); err != nil {
		return State{}, err
	}
	st, err := s.store.GetWorkingState(ctx, ns, name)
	if err != nil {
		return State{}, fmt.Errorf("memory: get state: %w", err)
	}
	if st.Version == 0 {
		return State{}, fmt.Errorf("memory: get state: %w", ErrNotFound)
	}
	return s.liveLease(st), nil
}

// liveLease drops an expired lease from st.
func (s *Service) liveLease(st State) State {
	if st.Lease != nil && !s.now().Before(st.Lease.ExpiresAt) {
		st.Lease = nil
	}
	return st
}

// Lease grants caller a lease on slot name of ns for ttl (0 means
// DefaultLeaseTTL), renewing its own lease, or taking over one whose
// holder HolderAlive reports gone. It fails with [ErrNamespaceMismatch],
// [ErrInvalid] (bad name, ttl negative or over MaxLeaseTTL),
// [ErrHolderGone] (HolderAlive reports the caller's own pod gone), a
// [*LeaseHeldError], or a store error.
func (s *Service) Lease(ctx context.Context, caller apikey.Identity, ns Namespace, name string, ttl time.Duration) (Grant, error) {
	if err := checkNamespace(caller, ns); err != nil {
		return Grant{}, err
	}
	if err := checkName(name); err != nil {
		return Grant{}, err
	}
	switch {
	case ttl == 0:
		ttl = s.defaultTTL
	case ttl < time.Second || ttl > s.maxTTL:
		return Grant{}, invalid("ttl_seconds must be 1 to %d", int64(s.maxTTL/time.Second))
	}
	if s.holderAlive != nil {
		// A gone pod's key outlives it: without this, it would get the
		// next epoch once its successor released the slot or let the
		// lease lapse, and overwrite what the successor wrote.
		alive, aerr := s.holderAlive(ctx, caller)
		switch {
		case aerr != nil:
			s.log.WarnContext(ctx, "lease caller check failed; treating caller as alive", "tenant", ns.Tenant,
				"agent", ns.Agent, "name", name, "session", caller.Session, "err", aerr)
		case !alive:
			s.log.InfoContext(ctx, "lease refused to a gone pod", "tenant", ns.Tenant, "agent", ns.Agent,
				"name", name, "session", caller.Session)
			return Grant{}, fmt.Errorf("memory: lease: %w", ErrHolderGone)
		}
	}
	req := LeaseRequest{Holder: caller, TTL: ttl, Now: s.now().UTC()}
	g, err := s.store.AcquireStateLease(ctx, ns, name, req)
	var held *LeaseHeldError
	if errors.As(err, &held) && s.holderAlive != nil {
		alive, aerr := s.holderAlive(ctx, held.Lease.HolderIdentity)
		switch {
		case aerr != nil:
			s.log.WarnContext(ctx, "lease holder check failed; treating holder as alive", "tenant", ns.Tenant,
				"agent", ns.Agent, "name", name, "holder", held.Lease.Holder, "err", aerr)
		case !alive:
			req.TakeOver = held.Lease.Epoch
			g, err = s.store.AcquireStateLease(ctx, ns, name, req)
			if err == nil {
				s.log.InfoContext(ctx, "lease taken over from a gone holder", "tenant", ns.Tenant, "agent", ns.Agent,
					"name", name, "old_holder", held.Lease.Holder, "old_epoch", held.Lease.Epoch,
					"holder", caller.Session, "epoch", g.Epoch)
			}
		}
	}
	if err != nil {
		return Grant{}, fmt.Errorf("memory: lease: %w", err)
	}
	return g, nil
}

// PutState writes value (one JSON value, at most MaxStateBytes, see the
// package doc) to slot name
// of ns, fenced by caller's lease epoch and the expected version ifVersion
// (0: never written; [AnyVersion]: any). It fails with
// [ErrNamespaceMismatch], [ErrInvalid], a [*TooLargeError], [ErrLeaseLost],
// a [*VersionConflictError], or a store error.
func (s *Service) PutState(ctx context.Context, caller apikey.Identity, ns Namespace, name string, epoch, ifVersion int64, value json.RawMessage) (State, error) {
	if err := checkNamespace(caller, ns); err != nil {
		return State{}, err
	}
	if err := checkName(name); err != nil {
		return State{}, err
	}
	if epoch < 1 {
		return State{}, invalid("lease epoch must be a positive integer")
	}
	if ifVersion < AnyVersion {
		return State{}, invalid("version must be a non-negative integer or *")
	}
	if len(value) > s.maxState {
		return State{}, &TooLargeError{What: "state", Limit: int64(s.maxState)}
	}
	if err := checkStateValue(value); err != nil {
		return State{}, err
	}
	st, err := s.store.PutWorkingState(ctx, ns, name, PutRequest{
		Holder: caller, Epoch: epoch, IfVersion: ifVersion, Value: value, Now: s.now().UTC(),
	})
	if err != nil {
		return State{}, fmt.Errorf("memory: put state: %w", err)
	}
	return s.liveLease(st), nil
}

// maxStateDepth bounds the nesting of arrays and objects in a state
// value: far beyond any working state, and within what common readers
// take in the response that carries it (Python's json stops near 1000
// levels; encoding/json at 10000, which the MCP result's own levels
// reached first).
const maxStateDepth = 100

// checkStateValue refuses a state value that some path could not carry
// as written, so that HTTP and MCP store and read the same values: it
// must be one I-JSON value (RFC 7493: valid UTF-8, no unpaired surrogate
// escape, no member name twice in an object, which readers resolve
// differently), every number must be within float64's range (1e400 is
// refused: the MCP SDKs read numbers as doubles), and arrays and objects
// nest at most maxStateDepth deep.
func checkStateValue(value []byte) error {
	if !utf8.Valid(value) || !jsontext.Value(value).IsValid() {
		return invalid("state must be one JSON value of valid UTF-8, without duplicate members or unpaired surrogate escapes (\\ud800)")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(value))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return invalid("state must be one JSON value")
		}
		if dec.StackDepth() > maxStateDepth {
			return invalid("state nests arrays and objects over %d deep", maxStateDepth)
		}
		if tok.Kind() == '0' {
			if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
				return invalid("state number %.32s is out of float64's range", tok.String())
			}
		}
	}
}

// Release ends caller's lease epoch on slot name of ns. It fails with
// [ErrNamespaceMismatch], [ErrInvalid], [ErrLeaseLost] (caller does not
// hold that epoch), or a store error.
func (s *Service) Release(ctx context.Context, caller apikey.Identity, ns Namespace, name string, epoch int64) error {
	if err := checkNamespace(caller, ns); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	if epoch < 1 {
		return invalid("lease epoch must be a positive integer")
	}
	if err := s.store.ReleaseStateLease(ctx, ns, name, caller, epoch); err != nil {
		return fmt.Errorf("memory: release lease: %w", err)
	}
	return nil
}

// ParseIfMatch parses an If-Match value: "*" is [AnyVersion]; a version is
// a non-negative decimal, bare (3) or as an entity tag ("3"). Empty is
// [ErrPreconditionRequired]; anything else is [ErrInvalid].
func ParseIfMatch(v string) (int64, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return 0, ErrPreconditionRequired
	case v == "*":
		return AnyVersion, nil
	case len(v) > maxHeaderBytes:
		return 0, invalid("If-Match must be a version, a quoted version or *")
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	n, err := parseUint(v)
	if err != nil {
		return 0, invalid("If-Match must be a version, a quoted version or *")
	}
	return n, nil
}

// ParseEpoch parses a Lease-Epoch value: a positive decimal.
func ParseEpoch(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, invalid("Lease-Epoch header is required")
	}
	n, err := parseUint(v)
	if err != nil || n == 0 {
		return 0, invalid("Lease-Epoch must be a positive integer")
	}
	return n, nil
}

// parseUint accepts only ASCII digits (no sign, no spaces).
func parseUint(v string) (int64, error) {
	if v == "" || len(v) > 18 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(v, 10, 64)
}
