package kubeauth

import (
	"context"
)

// attest does the live reads of one exchange after its TokenReview: the
// pod (livePod), the service account (liveServiceAccount) and the owner
// chain Pod -> Sandbox -> SandboxClaim (ownerChain). Every read is made
// and every check applies on every exchange; nothing is cached.
//
// # Order and concurrency
//
// The reads are, in their sequential order: pod, service account,
// Sandbox, SandboxClaim. The Sandbox GET needs the pod's controller
// reference and the claim GET the Sandbox's, so those three form a
// chain; the service-account read needs only the TokenReview and runs
// alongside the whole chain. An exchange therefore costs about
// TokenReview + max(service account, pod + Sandbox + claim) instead of
// the sum of all five calls.
//
// # Errors
//
// The error is the one the sequential order gives: the first failure in
// the order above, whatever order the reads finish in. A read is
// cancelled only when a read earlier in that order has failed (its own
// result can then no longer matter): a failed pod read cancels the
// service-account read and no chain read starts; a failed
// service-account read cancels the Sandbox and claim reads. The pod read
// is never cancelled by a sibling. attest returns only after every read
// it started has returned (no goroutine outlives it).
func (e *Exchanger) attest(ctx context.Context, user reviewedUser) (chain, error) {
	saCtx, cancelSA := context.WithCancel(ctx)
	defer cancelSA()
	chainCtx, cancelChain := context.WithCancel(ctx)
	defer cancelChain()

	saDone := make(chan error, 1)
	go func() {
		err := e.liveServiceAccount(saCtx, user)
		if err != nil {
			// The Sandbox and claim reads come after this one: their
			// results cannot change the outcome any more.
			cancelChain()
		}
		saDone <- err
	}()

	pod, err := e.livePod(ctx, user.namespace, user.podName, user.podUID)
	if err != nil {
		cancelSA()
		<-saDone
		return chain{}, err
	}
	ch, chainErr := e.ownerChain(chainCtx, pod)
	if err := <-saDone; err != nil {
		return chain{}, err
	}
	if chainErr != nil {
		return chain{}, chainErr
	}
	return ch, nil
}
