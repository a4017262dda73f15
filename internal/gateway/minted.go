package gateway

import (
	"context"
	"errors"
	"slices"

	"golang.org/x/sync/singleflight"
)

// mintedTokens answers whether a verified token is one the admin plane
// minted: its jti is recorded in the [Store] (by [Gateway.Mint] on any
// replica sharing it) with the token's exp, iat, providers, models,
// repos, run_id, tenant and agent. A signature alone does not prove it: a token signed
// with a leaked key, or one that reuses a minted jti with other claims,
// fails the check. Each jti is looked up once, then cached until its
// exp + leeway (bounded like the verify cache; a miss is never cached).
type mintedTokens struct {
	cache   *expiringCache[string, TokenRecord]
	lookups singleflight.Group
}

func newMintedTokens(size int) *mintedTokens {
	return &mintedTokens{cache: newExpiringCache[string, TokenRecord](size)}
}

// checkMinted returns nil if c's jti was minted with c's claims,
// [ErrTokenNotMinted] if not, and [ErrTokenUnchecked] if the store could
// not be asked (fail closed).
func (g *Gateway) checkMinted(ctx context.Context, c *Claims) error {
	now := g.now()
	if rec, until, ok := g.minted.cache.get(c.ID); ok && now.Before(until) {
		if !recordMatches(rec, c) {
			return ErrTokenNotMinted
		}
		return nil
	}
	v, err, _ := g.minted.lookups.Do(c.ID, func() (any, error) {
		// Not the request's context: its end must not fail the callers
		// sharing this lookup. Bounded like a poll.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.maxStale)
		defer cancel()
		return g.store.LookupToken(lctx, c.ID)
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return ErrTokenNotMinted
	case err != nil:
		g.log.WarnContext(ctx, "gateway token record lookup failed; refusing the token", "jti", c.ID, "err", err)
		return ErrTokenUnchecked
	}
	rec := v.(TokenRecord)
	if rec.Models == nil {
		g.log.InfoContext(ctx, "gateway token recorded before models were kept; refusing it until it is re-minted", "jti", c.ID)
	}
	if !recordMatches(rec, c) {
		return ErrTokenNotMinted
	}
	g.minted.cache.put(c.ID, rec, c.ExpiresAt.Add(g.leeway), now)
	return nil
}

// remember caches a token this replica has just minted and recorded.
func (g *Gateway) remember(rec TokenRecord) {
	g.minted.cache.put(rec.JTI, rec, rec.ExpiresAt.Add(g.leeway), g.now())
}

// recordMatches reports whether c's claims are those recorded at mint:
// times to the second; budgets exactly; providers, models and repos each as a set (order and
// repeats do not change what the token allows), the token's models equal
// to the recorded set exactly, so a token without a models claim matches
// only a record of none. A record with nil Models (kept before models
// were recorded) matches no token: its restriction cannot be checked.
func recordMatches(rec TokenRecord, c *Claims) bool {
	if c.ExpiresAt == nil || c.IssuedAt == nil || rec.Models == nil ||
		rec.ExpiresAt.Unix() != c.ExpiresAt.Unix() || rec.IssuedAt.Unix() != c.IssuedAt.Unix() ||
		rec.RunID != c.RunID || rec.Tenant != c.Tenant || rec.Agent != c.Agent {
		return false
	}
	tb, rb := c.budgets()
	return sameSet(rec.Providers, c.Providers) && sameSet(rec.Models, c.Models) && sameRepos(rec.Repos, c.Repos) &&
		rec.Budget == tb && rec.RunBudget == rb
}

// sameSet reports whether a and b hold the same strings, ignoring order
// and repeats.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
