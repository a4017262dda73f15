package signer_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
)

// TestAttackRegisterRunsUnbounded: any live key may POST /v1/signer/runs
// (and /mcp/signer's signer_register_run) as often as it likes. Each run
// is a run.registered record in the one log every tenant shares (a
// single writer) and an entry in the signer's in-memory run table that
// stays until the run has been idle for IdleTimeout (1 h by default).
// There is no per-agent bound on open runs and no rate limit on the
// signer API (the only limiter is on key exchanges), so one compromised
// sandbox grows the signer's memory and the shared log without limit and
// slows every other tenant's decisions. Registering far more open runs
// than any agent needs must be refused at some point.
func TestAttackRegisterRunsUnbounded(t *testing.T) {
	e := newEnv(t, nil)
	const n = 3000
	var ok atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := e.s.Register(context.Background(), identity()); err == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := ok.Load(); got == n {
		t.Errorf("one agent registered %d open runs, all accepted: no bound on a sandbox's open runs (each held in memory for IdleTimeout and logged in the shared log)", got)
	}
}

// TestMaxOpenRuns: an agent holds at most MaxOpenRuns open runs; the
// next Register is refused with ErrTooManyRuns (HTTP 429, too_many_runs)
// and records nothing; another agent is not affected; closing a run makes
// room for one more.
func TestMaxOpenRuns(t *testing.T) {
	e := newEnv(t, func(o *signer.Options) { o.MaxOpenRuns = 3 })
	ctx := context.Background()
	var runs []signer.RunInfo
	for range 3 {
		r, err := e.s.Register(ctx, identity())
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	_, err := e.s.Register(ctx, identity())
	if !errors.Is(err, signer.ErrTooManyRuns) || signer.HTTPStatusFor(err) != http.StatusTooManyRequests || signer.ErrorCode(err) != "too_many_runs" {
		t.Fatalf("Register past MaxOpenRuns = %v (status %d, code %q), want ErrTooManyRuns, 429, too_many_runs", err, signer.HTTPStatusFor(err), signer.ErrorCode(err))
	}
	other := identity()
	other.Agent = "other-agent"
	if _, err := e.s.Register(ctx, other); err != nil {
		t.Fatalf("another agent's Register = %v", err)
	}
	if _, err := e.s.CloseRun(ctx, identity(), runs[0].Run); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Register(ctx, identity()); err != nil {
		t.Fatalf("Register after a close = %v, want room for one more", err)
	}
}
