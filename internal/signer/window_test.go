package signer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/signer"
)

// TestCommitWindowSparesALoneCaller: the group commit window waits only
// for callers the last commit acknowledged that have not come back. A
// caller deciding one call after another is always the one that came
// back, so it never waits, even with a window of an hour; and callers
// that stop coming back hold a batch at most the window (here: the test's
// concurrent phase ends, and the last batches still commit).
func TestCommitWindowSparesALoneCaller(t *testing.T) {
	e := newEnv(t, func(o *signer.Options) { o.CommitWindow = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := e.s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := e.s.Decide(ctx, identity(), info.Run, signer.DecideRequest{
			CallID: fmt.Sprintf("c%d", i), Tool: "Bash", Args: []byte(`{"command":"ls"}`)}); err != nil {
			t.Fatalf("decide %d: %v (a lone caller waited for the commit window)", i, err)
		}
	}
}

// TestCommitWindowEnds: concurrent callers that stop calling leave a
// batch waiting for them; it commits when the window runs out.
func TestCommitWindowEnds(t *testing.T) {
	e := newEnv(t, func(o *signer.Options) { o.CommitWindow = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := e.s.Register(ctx, identity())
			if err != nil {
				errs <- err
				return
			}
			for i := range 5 + g { // callers stop at different times
				if _, err := e.s.Decide(ctx, identity(), info.Run, signer.DecideRequest{
					CallID: fmt.Sprintf("c%d", i), Tool: "Bash", Args: []byte(`{"command":"ls"}`)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
