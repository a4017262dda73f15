package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// pruneEvery is how often expired revocations are dropped from memory and
// the store.
const pruneEvery = time.Minute

// pruneGrace is how long past a token's exp + leeway its record and
// revocation stay in the store, so that revoking a token that has just
// expired (a runner whose command outlived the TTL) still answers 204.
const pruneGrace = time.Hour

// revocationSet is the in-memory set of revoked jtis, each with the time
// after which its token can no longer verify (exp + leeway). An entry is
// kept until the store drops its revocation (pruneGrace later), not only
// until then: a wall clock stepped forward past that time and back would
// otherwise find the token valid again and its revocation gone from both
// memory and the poll (whose cursor is past it). Lookups are O(1).
type revocationSet struct {
	mu sync.RWMutex
	m  map[string]time.Time
}

func newRevocationSet() *revocationSet { return &revocationSet{m: make(map[string]time.Time)} }

func (s *revocationSet) add(jti string, until time.Time) {
	s.mu.Lock()
	s.m[jti] = until
	s.mu.Unlock()
}

func (s *revocationSet) has(jti string) bool {
	s.mu.RLock()
	_, ok := s.m[jti]
	s.mu.RUnlock()
	return ok
}

func (s *revocationSet) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// prune drops entries whose token could no longer verify at before and
// returns their jtis.
func (s *revocationSet) prune(before time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for jti, until := range s.m {
		if before.After(until) {
			delete(s.m, jti)
			out = append(out, jti)
		}
	}
	return out
}

// inflightSet tracks the requests in flight per jti with the functions
// that cancel them.
type inflightSet struct {
	mu sync.Mutex
	m  map[string]map[*inflight]struct{}
}

type inflight struct {
	cancel context.CancelCauseFunc
}

func newInflightSet() *inflightSet { return &inflightSet{m: make(map[string]map[*inflight]struct{})} }

// add registers a request of jti; the returned entry must be removed.
func (s *inflightSet) add(jti string, cancel context.CancelCauseFunc) *inflight {
	e := &inflight{cancel: cancel}
	s.mu.Lock()
	set := s.m[jti]
	if set == nil {
		set = make(map[*inflight]struct{}, 1)
		s.m[jti] = set
	}
	set[e] = struct{}{}
	s.mu.Unlock()
	return e
}

func (s *inflightSet) remove(jti string, e *inflight) {
	s.mu.Lock()
	if set := s.m[jti]; set != nil {
		delete(set, e)
		if len(set) == 0 {
			delete(s.m, jti)
		}
	}
	s.mu.Unlock()
}

// cancel cancels every request of jti in flight with cause ErrRevoked and
// returns how many.
func (s *inflightSet) cancel(jti string) int {
	s.mu.Lock()
	set := s.m[jti]
	delete(s.m, jti)
	s.mu.Unlock()
	for e := range set {
		e.cancel(ErrRevoked)
	}
	return len(set)
}

// cancelAll cancels every request in flight, of every jti, with cause and
// returns how many.
func (s *inflightSet) cancelAll(cause error) int {
	s.mu.Lock()
	all := s.m
	s.m = make(map[string]map[*inflight]struct{})
	s.mu.Unlock()
	n := 0
	for _, set := range all {
		for e := range set {
			e.cancel(cause)
			n++
		}
	}
	return n
}

// stale reports whether this replica's view of revocations is older than
// MaxStaleness: the gateway must then refuse every request.
func (g *Gateway) stale() bool {
	return g.sinceFresh() >= g.maxStale
}

// Current reports, for readiness, whether this replica's view of
// revocations is within [Options.MaxStaleness]: nil, or an error wrapping
// [ErrRevocationStale] saying how old it is. While it is not, the data
// plane refuses every request.
func (g *Gateway) Current(context.Context) error {
	if g.stale() {
		age := g.sinceFresh().Round(time.Millisecond)
		return fmt.Errorf("%w: last successful poll %v ago (bound %v)", ErrRevocationStale, age, g.maxStale)
	}
	return nil
}

// monotonic is the time since the gateway was made, on the monotonic
// clock: staleness is measured on it, not on Options.Now or the wall
// clock, so that a clock step neither hides an outage nor makes one up.
func (g *Gateway) monotonic() time.Duration { return time.Since(g.epoch) }

// sinceFresh is how long ago the last successful poll started.
func (g *Gateway) sinceFresh() time.Duration { return g.monotonic() - time.Duration(g.freshAt.Load()) }

// markFresh records a successful poll that started at started: the view
// is current for another MaxStaleness.
func (g *Gateway) markFresh(started time.Duration) {
	g.freshAt.Store(int64(started))
	select {
	case g.freshened <- struct{}{}:
	default:
	}
}

// watchStaleness cuts every request in flight, streams included, when
// the view becomes stale (MaxStaleness after the last successful poll,
// whether or not the poller is stuck in a call to the store), once per
// outage, until ctx is done. New requests are refused by the handler
// until a poll succeeds.
func (g *Gateway) watchStaleness(ctx context.Context) {
	t := time.NewTimer(g.maxStale)
	defer t.Stop()
	cut := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.freshened:
			if cut {
				cut = false
				g.log.InfoContext(ctx, "gateway revocation view is current again")
			}
		case <-t.C:
		}
		left := g.maxStale - g.sinceFresh()
		if left > 0 {
			t.Reset(left)
			continue
		}
		if !cut {
			cut = true
			n := g.inflight.cancelAll(ErrRevocationStale)
			g.log.ErrorContext(ctx, "gateway revocation view is stale: refusing every request until the store answers",
				"max_staleness", g.maxStale, "cancelled_requests", n)
		}
		t.Reset(g.maxStale)
	}
}

// run is the background poller: revocations from other replicas and key
// file changes every poll interval, pruning every minute.
func (g *Gateway) run(ctx context.Context) {
	defer close(g.done)
	watched := make(chan struct{})
	go func() { defer close(watched); g.watchStaleness(ctx) }()
	defer func() { <-watched }()
	t := time.NewTicker(g.poll)
	defer t.Stop()
	nextPrune := g.now().Add(pruneEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.pollNow:
		}
		// A poll that hangs (a partitioned database) must not outlive
		// the staleness bound, or the view could not become current
		// again as soon as the store answers.
		pctx, cancel := context.WithTimeout(ctx, g.maxStale)
		if err := g.pollRevocations(pctx); err != nil && ctx.Err() == nil {
			g.log.WarnContext(ctx, "revocation poll failed", "err", err, "stale", g.stale())
		}
		g.keys.refresh(ctx)
		if now := g.now(); now.After(nextPrune) {
			nextPrune = now.Add(pruneEvery)
			g.prune(pctx, now)
		}
		cancel()
	}
}

// ApplyRevocation applies a revocation made on another replica, as a
// store notification announces it (see the PostgreSQL store's
// ListenGatewayRevocations): the token is refused from now on and its
// requests in flight are cut. Only JTI and ExpiresAt are used; a
// revocation the store would already have pruned is ignored. The poller
// still finds it in the store, which is what makes delivery certain;
// this makes it fast. Safe for concurrent use.
func (g *Gateway) ApplyRevocation(rev Revocation) {
	if rev.JTI == "" || g.pruned(rev, g.now()) || g.revoked.has(rev.JTI) {
		return
	}
	if n := g.apply(rev); n > 0 {
		g.log.Info("revoked token's requests cancelled", "jti", rev.JTI, "cancelled_requests", n)
	}
	g.metrics.revocations.Set(float64(g.revoked.len()))
}

// pruned reports whether rev is past what the store and the in-memory
// set keep (pruneGrace after its token's exp + leeway) at now. One the
// store still keeps is applied though its token no longer verifies: a
// clock stepped back would make it verify again.
func (g *Gateway) pruned(rev Revocation, now time.Time) bool {
	return now.After(rev.ExpiresAt.Add(g.leeway + pruneGrace))
}

// PollNow asks the poller to read the store's revocations now instead of
// at its next tick, e.g. when a notification listener (re)starts and may
// have missed some. It does not wait.
func (g *Gateway) PollNow() {
	select {
	case g.pollNow <- struct{}{}:
	default:
	}
}

// pollRevocations applies the revocations committed since the last poll
// and, when it succeeds, marks the view fresh as of its start.
func (g *Gateway) pollRevocations(ctx context.Context) error {
	started := g.monotonic()
	revs, err := g.store.ListRevocations(ctx, g.cursor)
	if err != nil {
		return fmt.Errorf("gateway: list revocations: %w", err)
	}
	defer g.markFresh(started)
	now := g.now()
	for _, rev := range revs {
		if rev.Seq > g.cursor {
			g.cursor = rev.Seq
		}
		if g.pruned(rev, now) {
			continue
		}
		if !g.revoked.has(rev.JTI) {
			if n := g.apply(rev); n > 0 {
				g.log.InfoContext(ctx, "revoked token's requests cancelled", "jti", rev.JTI, "cancelled_requests", n)
			}
		}
	}
	g.metrics.revocations.Set(float64(g.revoked.len()))
	return nil
}

// prune drops token records and revocations that expired pruneGrace ago
// from the store and then, only once the store has, the same revocations
// from memory, forgetting those tokens' minted records: were the clock
// stepped back, such a token verifies again and is refused as not minted
// (its record is gone) instead of served with its revocation forgotten.
func (g *Gateway) prune(ctx context.Context, now time.Time) {
	n, err := g.store.PruneExpired(ctx, now.Add(-g.leeway-pruneGrace))
	if err != nil {
		if ctx.Err() == nil {
			g.log.WarnContext(ctx, "pruning expired gateway tokens failed", "err", err)
		}
		return
	}
	if n > 0 {
		g.log.DebugContext(ctx, "pruned expired gateway tokens", "rows", n)
	}
	for _, jti := range g.revoked.prune(now.Add(-pruneGrace)) {
		g.minted.cache.remove(jti)
	}
	g.metrics.revocations.Set(float64(g.revoked.len()))
}
