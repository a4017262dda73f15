package signer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentcustody/custody/internal/filestamp"
	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/verify"
)

// policyCache holds each tenant's parsed policy, read again when the file
// changes (filestamp: another file in its place, or a write, even one
// that keeps its size and modification time) and at every call while the
// file's last change is too recent to be told apart from a later one.
type policyCache struct {
	dir     string
	mu      sync.Mutex
	entries map[string]*policyEntry
}

type policyEntry struct {
	stamp   filestamp.Stamp // zero: read the file again at the next call
	missing bool
	pol     *policy.Policy
	hash    string // verify.PolicyHash of the file bytes
	invalid bool   // the file does not parse: calls are denied
}

// cached returns what tenantPolicy returns for tenant's file of e.
func (e *policyEntry) cached(tenant string) (*policy.Policy, string, error) {
	if e.invalid {
		return nil, e.hash, &invalidPolicyError{tenant: tenant, hash: e.hash}
	}
	return e.pol, e.hash, nil
}

// invalidPolicyError is returned for a tenant policy file that does not
// parse; the call is denied under [policy.RulePolicyInvalid] and its
// record carries the hash of the refused file (stored as a snapshot, so
// a bundle shows what was refused).
type invalidPolicyError struct {
	tenant string
	hash   string
}

func (e *invalidPolicyError) Error() string {
	return fmt.Sprintf("policy %s: the file does not parse", e.tenant)
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
	}
	stamp, settled := filestamp.Of(fi, time.Now())
	if !settled {
		stamp = filestamp.Stamp{}
	}
	if e != nil && !e.missing && stamp != (filestamp.Stamp{}) && e.stamp == stamp {
		return e.cached(tenant)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("policy %s: %w", tenant, err)
	}
	h := verify.PolicyHash(raw)
	if e != nil && !e.missing && e.hash == h {
		// Read again (just written, or its stamp changed) but the same
		// bytes: no parse, no snapshot.
		c.mu.Lock()
		c.entries[tenant] = &policyEntry{stamp: stamp, pol: e.pol, hash: h, invalid: e.invalid}
		c.mu.Unlock()
		return e.cached(tenant)
	}
	p, perr := policy.Parse(tenant+".yaml", raw)
	if err := s.store.PutPolicy(ctx, h, raw); err != nil {
		return nil, "", fmt.Errorf("policy %s: %w", tenant, err)
	}
	c.mu.Lock()
	c.entries[tenant] = &policyEntry{stamp: stamp, pol: p, hash: h, invalid: perr != nil}
	c.mu.Unlock()
	if perr != nil {
		s.log.ErrorContext(ctx, "tenant policy refused; the tenant's calls are denied until it is fixed",
			"tenant", tenant, "policy_hash", h, "rule", policy.RulePolicyInvalid, "err", perr)
		return nil, h, &invalidPolicyError{tenant: tenant, hash: h}
	}
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

// denyInvalidPolicy turns d, decided under the built-in rules only, into
// the deny a tenant gets while its policy file does not parse: the
// built-in rule ids that matched, then [policy.RulePolicyInvalid]. The
// reason names no policy content (the parse error is in the signer log).
func denyInvalidPolicy(d policy.Decision) policy.Decision {
	d.Effect = policy.Deny
	d.Default = false
	d.RuleIDs = append(d.RuleIDs, policy.RulePolicyInvalid)
	if d.Errors == nil {
		d.Errors = map[string]string{}
	}
	d.Errors[policy.RulePolicyInvalid] = "the tenant policy file does not parse; every call is denied until it is fixed"
	return d
}
