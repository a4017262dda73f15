// Package apikey mints, verifies and revokes custody keys: opaque,
// short-lived bearer credentials handed out by the identity exchange.
//
// # Format
//
// A key is the ASCII string
//
//	"ck_" || base64url-nopad(32 random bytes)
//
// 46 bytes long, for example
//
//	ck_q5n8oV4J2b3kq0m0Hk0YxY5o7h8c0wz1sQ3x9m0b7cA
//
// Only the SHA-256 of the whole string is stored; its lowercase hex form is
// the key's ID, safe to log and used to revoke a key without holding it.
// A key speaks for one [Identity] until its expiry (a whole second, UTC) or
// until it is revoked, whichever comes first.
//
// Verification is cached per replica for [Options.CacheTTL] (default 30 s),
// and so is a revocation read from the store (the key is then refused
// without reading it again); a revocation through this package evicts the
// entry at once on this replica. Other replicas see it when their cache
// entry expires, or at once where the store broadcasts revocations (see
// [Service.Evict] and [Service.EvictAll]).
package apikey

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Prefix starts every key.
const Prefix = "ck_"

// keyLen is the length of a well-formed key: the prefix and 43 base64url
// characters for 32 bytes.
const keyLen = len(Prefix) + 43

// Sentinel errors. Callers test them with errors.Is; [HTTPStatusFor] maps
// them to status codes. None of them carries the key.
var (
	// ErrUnauthenticated is the parent of every reason a key is refused.
	ErrUnauthenticated = errors.New("key refused")
	// ErrMalformed: the string is not shaped like a key.
	ErrMalformed = fmt.Errorf("%w: malformed key", ErrUnauthenticated)
	// ErrUnknown: no such key was ever minted here.
	ErrUnknown = fmt.Errorf("%w: unknown key", ErrUnauthenticated)
	// ErrExpired: the key's expires_at has passed.
	ErrExpired = fmt.Errorf("%w: key expired", ErrUnauthenticated)
	// ErrRevoked: the key was revoked.
	ErrRevoked = fmt.Errorf("%w: key revoked", ErrUnauthenticated)
	// ErrNotFound is what a [Store] returns for a hash it does not hold.
	ErrNotFound = errors.New("key not found")
)

// Identity is who a key speaks for. It is fixed when the key is minted.
type Identity struct {
	// Tenant is the sandbox's namespace (from the service account in the
	// TokenReview), or the tenant of a static entry.
	Tenant string `json:"tenant"`
	// Agent is the SandboxClaim's name, stable across pods.
	Agent string `json:"agent"`
	// Session is the pod's name (from TokenReview status.user.extra
	// authentication.kubernetes.io/pod-name): which pod did the work.
	Session string `json:"session"`
	// Method is the auth method that attested the identity: "kubernetes"
	// or "static".
	Method string `json:"method"`
	// ServiceAccount is "system:serviceaccount:NS:NAME" for the kubernetes
	// method, empty otherwise.
	ServiceAccount string `json:"service_account,omitempty"`
	// PodUID is the pod's UID for the kubernetes method, empty otherwise.
	// Together with Session it tells whether the holder pod still exists.
	PodUID string `json:"pod_uid,omitempty"`
	// SandboxName, SandboxUID, ClaimUID record the rest of the owner chain
	// (kubernetes method only).
	SandboxName string `json:"sandbox,omitempty"`
	SandboxUID  string `json:"sandbox_uid,omitempty"`
	ClaimUID    string `json:"claim_uid,omitempty"`
}

// Record is what the store keeps for one key.
type Record struct {
	// Hash is SHA-256 of the key string.
	Hash      [32]byte
	Identity  Identity
	IssuedAt  time.Time
	ExpiresAt time.Time
	// RevokedAt is zero unless the key was revoked.
	RevokedAt time.Time
}

// ID is the key's public identifier: lowercase hex of Hash.
func (r Record) ID() string { return hex.EncodeToString(r.Hash[:]) }

// Store persists key records.
//
// Implementations must be safe for concurrent use. Insert must be durable
// when it returns. Lookup returns [ErrNotFound] for an unknown hash. Revoke
// sets RevokedAt if it is unset (revoking twice keeps the first time) and
// returns [ErrNotFound] for an unknown hash. RevokeAgentKeys revokes every
// key of tenant/agent not yet expired at time at and returns their hashes.
// DeleteExpiredKeys deletes every key that expired before before (revoked
// or not: an expired key is refused either way) and returns how many.
type Store interface {
	InsertKey(ctx context.Context, r Record) error
	LookupKey(ctx context.Context, hash [32]byte) (Record, error)
	RevokeKey(ctx context.Context, hash [32]byte, at time.Time) error
	RevokeAgentKeys(ctx context.Context, tenant, agent string, at time.Time) ([][32]byte, error)
	DeleteExpiredKeys(ctx context.Context, before time.Time) (int64, error)
}

// Options configure a [Service]. The zero value of each field means its
// default.
type Options struct {
	// Store is required.
	Store Store
	// TTL is the lifetime of a minted key when Mint is given none.
	// Default 15 minutes.
	TTL time.Duration
	// CacheTTL is how long a successful verification is reused on this
	// replica without reading the store. Default 30 s; negative disables
	// the cache. A revoked key may be accepted by another replica for up
	// to this long unless revocations are broadcast.
	CacheTTL time.Duration
	// CacheSize bounds the number of cached verifications and revocations.
	// Default 100000; when full, new ones are not cached.
	CacheSize int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Log receives one line per mint and revocation (key ID only).
	// Default slog.Default().
	Log *slog.Logger
}

// Service mints, verifies and revokes keys. It is safe for concurrent use.
type Service struct {
	store Store
	ttl   time.Duration
	now   func() time.Time
	log   *slog.Logger
	cache *cache
}

// New validates opts and returns a Service.
func New(opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("apikey: Store is required")
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("apikey: negative TTL %v", opts.TTL)
	}
	if opts.TTL == 0 {
		opts.TTL = 15 * time.Minute
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 30 * time.Second
	}
	if opts.CacheSize < 0 {
		return nil, fmt.Errorf("apikey: negative CacheSize %d", opts.CacheSize)
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = 100000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s := &Service{store: opts.Store, ttl: opts.TTL, now: opts.Now, log: opts.Log.With("service", "apikey")}
	if opts.CacheTTL > 0 {
		s.cache = newCache(opts.CacheTTL, opts.CacheSize)
	}
	return s, nil
}

// TTL is the default key lifetime.
func (s *Service) TTL() time.Duration { return s.ttl }

// Minted is a freshly minted key. Key is the secret: hand it to the caller
// once and never log it.
type Minted struct {
	Key       string
	ID        string
	ExpiresAt time.Time
	Identity  Identity
}

// Mint creates and stores a key for id that lives ttl (the service default
// if ttl is 0), truncated to whole seconds.
func (s *Service) Mint(ctx context.Context, id Identity, ttl time.Duration) (Minted, error) {
	if ttl <= 0 {
		ttl = s.ttl
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Minted{}, fmt.Errorf("apikey: read random: %w", err)
	}
	key := Prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.now().UTC().Truncate(time.Second)
	r := Record{Hash: sha256.Sum256([]byte(key)), Identity: id, IssuedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.store.InsertKey(ctx, r); err != nil {
		return Minted{}, fmt.Errorf("apikey: store key: %w", err)
	}
	s.log.InfoContext(ctx, "key minted", "key_id", r.ID(), "tenant", id.Tenant, "agent", id.Agent,
		"session", id.Session, "method", id.Method, "expires_at", r.ExpiresAt)
	return Minted{Key: key, ID: r.ID(), ExpiresAt: r.ExpiresAt, Identity: id}, nil
}

// wellFormed reports whether key has the shape of a key, without
// allocating.
func wellFormed(key string) bool {
	if len(key) != keyLen || key[:len(Prefix)] != Prefix {
		return false
	}
	for i := len(Prefix); i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// hashKey is SHA-256 of a well-formed key, hashed from a stack copy so
// that verification does not allocate.
func hashKey(key string) [32]byte {
	var buf [keyLen]byte
	n := copy(buf[:], key)
	return sha256.Sum256(buf[:n])
}

// Verify returns the record of a live key. It fails with [ErrMalformed],
// [ErrUnknown], [ErrExpired] or [ErrRevoked] (all wrapping
// [ErrUnauthenticated]), or with a store error.
func (s *Service) Verify(ctx context.Context, key string) (Record, error) {
	if !wellFormed(key) {
		return Record{}, ErrMalformed
	}
	hash := hashKey(key)
	now := s.now()
	var gen uint64
	if s.cache != nil {
		e, g, ok := s.cache.get(hash, now)
		switch {
		case ok && e.revoked:
			return Record{}, ErrRevoked
		case ok:
			return e.rec, nil
		}
		gen = g
	}
	r, err := s.store.LookupKey(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return Record{}, ErrUnknown
	}
	if err != nil {
		return Record{}, fmt.Errorf("apikey: look up key: %w", err)
	}
	if !r.RevokedAt.IsZero() {
		if s.cache != nil {
			// No earlier lookup may cache it now. The tombstone lives
			// from this read, not from now: it outlives every entry a
			// read before it can make (now may be long before the read).
			s.cache.putRevoked(r, s.now())
		}
		return Record{}, ErrRevoked
	}
	if !now.Before(r.ExpiresAt) {
		return Record{}, ErrExpired
	}
	if s.cache != nil {
		s.cache.put(r, now, gen) // not if evicted meanwhile
	}
	return r, nil
}

// Revoke revokes the key itself (a holder revoking its own key).
func (s *Service) Revoke(ctx context.Context, key string) error {
	if !wellFormed(key) {
		return ErrMalformed
	}
	return s.RevokeID(ctx, hashKey(key))
}

// RevokeID revokes the key whose SHA-256 is hash. It returns [ErrNotFound]
// if no such key exists. It evicts the key from this replica's cache.
func (s *Service) RevokeID(ctx context.Context, hash [32]byte) error {
	if err := s.store.RevokeKey(ctx, hash, s.now().UTC()); err != nil {
		if errors.Is(err, ErrNotFound) {
			return ErrNotFound
		}
		return fmt.Errorf("apikey: revoke key: %w", err)
	}
	s.Evict(hash)
	s.log.InfoContext(ctx, "key revoked", "key_id", hex.EncodeToString(hash[:]))
	return nil
}

// RevokeAgent revokes every live key of tenant/agent and returns how many.
func (s *Service) RevokeAgent(ctx context.Context, tenant, agent string) (int, error) {
	hashes, err := s.store.RevokeAgentKeys(ctx, tenant, agent, s.now().UTC())
	if err != nil {
		return 0, fmt.Errorf("apikey: revoke agent keys: %w", err)
	}
	for _, h := range hashes {
		s.Evict(h)
	}
	s.log.InfoContext(ctx, "agent keys revoked", "tenant", tenant, "agent", agent, "count", len(hashes))
	return len(hashes), nil
}

// PruneExpired deletes stored keys that expired more than grace ago, every
// interval, until ctx is done. Errors are logged and retried next time.
func (s *Service) PruneExpired(ctx context.Context, interval, grace time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.store.DeleteExpiredKeys(ctx, s.now().Add(-grace))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.ErrorContext(ctx, "pruning expired keys failed", "err", err)
		case n > 0:
			s.log.InfoContext(ctx, "expired keys pruned", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Evict drops hash from this replica's verification cache. A store that
// broadcasts revocations between replicas calls it on each replica.
func (s *Service) Evict(hash [32]byte) {
	if s.cache != nil {
		s.cache.evict(hash)
	}
}

// EvictAll empties this replica's verification cache, so that the next
// verification of every key reads the store. A store that broadcasts
// revocations calls it when it may have missed some (after reconnecting).
func (s *Service) EvictAll() {
	if s.cache != nil {
		s.cache.evictAll()
	}
}

// ParseID parses a key ID (64 lowercase hex digits) into a hash.
func ParseID(id string) ([32]byte, error) {
	var h [32]byte
	if len(id) != 64 {
		return h, ErrMalformed
	}
	if _, err := hex.Decode(h[:], []byte(id)); err != nil {
		return h, ErrMalformed
	}
	return h, nil
}
