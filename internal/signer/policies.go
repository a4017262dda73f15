package signer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/verify"
)

// policyCache holds each tenant's parsed policy, re-read when the file's
// size or modification time changes.
type policyCache struct {
	dir     string
	mu      sync.Mutex
	entries map[string]*policyEntry
}

type policyEntry struct {
	size    int64
	mod     time.Time
	missing bool
	pol     *policy.Policy
	hash    string // verify.PolicyHash of the file bytes
}

// validTenant is a Kubernetes namespace name (DNS label): safe as a file name.
func validTenant(t string) bool {
	if t == "" || len(t) > 63 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0) {
			return false
		}
	}
	return t != "." && t != ".."
}

// tenantPolicy returns the tenant's policy (nil: none) and the hash its
// records carry; the snapshot is stored before it is first used. A file
// that does not parse fails the call (closed).
func (s *Signer) tenantPolicy(ctx context.Context, tenant string) (*policy.Policy, string, error) {
	c := &s.pols
	if c.dir == "" || !validTenant(tenant) {
		h, err := s.emptyPolicy(ctx)
		return nil, h, err
	}
	path := filepath.Join(c.dir, tenant+".yaml")
	fi, statErr := os.Stat(path)
	c.mu.Lock()
	e := c.entries[tenant]
	c.mu.Unlock()
	switch {
	case errors.Is(statErr, os.ErrNotExist):
		h, err := s.emptyPolicy(ctx)
		return nil, h, err
	case statErr != nil:
		return nil, "", fmt.Errorf("policy %s: %w", tenant, statErr)
	case e != nil && !e.missing && e.size == fi.Size() && e.mod.Equal(fi.ModTime()):
		return e.pol, e.hash, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("policy %s: %w", tenant, err)
	}
	p, err := policy.Parse(tenant+".yaml", raw)
	if err != nil {
		s.log.ErrorContext(ctx, "tenant policy refused; calls fail until it is fixed", "tenant", tenant, "err", err)
		return nil, "", fmt.Errorf("policy %s: %w", tenant, err)
	}
	h := verify.PolicyHash(raw)
	if err := s.store.PutPolicy(ctx, h, raw); err != nil {
		return nil, "", fmt.Errorf("policy %s: %w", tenant, err)
	}
	c.mu.Lock()
	c.entries[tenant] = &policyEntry{size: fi.Size(), mod: fi.ModTime(), pol: p, hash: h}
	c.mu.Unlock()
	s.log.InfoContext(ctx, "tenant policy loaded", "tenant", tenant, "policy_hash", h, "rules", len(p.Rules()))
	return p, h, nil
}

// emptyPolicy stores the empty snapshot once and returns its hash.
func (s *Signer) emptyPolicy(ctx context.Context) (string, error) {
	h := verify.PolicyHash(nil)
	c := &s.pols
	c.mu.Lock()
	_, done := c.entries[""]
	c.mu.Unlock()
	if done {
		return h, nil
	}
	if err := s.store.PutPolicy(ctx, h, []byte{}); err != nil {
		return "", fmt.Errorf("policy snapshot: %w", err)
	}
	c.mu.Lock()
	c.entries[""] = &policyEntry{missing: true, hash: h}
	c.mu.Unlock()
	return h, nil
}
