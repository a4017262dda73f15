package signer

import (
	"context"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// Approver is the approval half of the agent API; *Signer implements it.
type Approver interface {
	RequestApproval(ctx context.Context, caller apikey.Identity, run string, req ApprovalRequest) (ApprovalInfo, error)
	WaitApproval(ctx context.Context, caller apikey.Identity, run, id string, wait time.Duration) (ApprovalInfo, error)
	ConsumeApproval(ctx context.Context, caller apikey.Identity, run, id string, req ConsumeRequest) (ApprovalInfo, error)
}

// AwaitApproval is the approval flow of a call decided ask, for a proxy
// that runs the call itself (the MCP and egress proxies): request an
// approval bound to req's exact arguments, wait up to wait for an
// operator (long polls of at most MaxWait), and consume it once approved.
// It returns the approval in its last state: ApprovalConsumed means the
// call may run now; ApprovalPending means nobody resolved it within wait
// (or ctx ended); any other state (denied, expired) means it may not.
// An error is the signer's, and the call may not run either.
func AwaitApproval(ctx context.Context, a Approver, caller apikey.Identity, run string, req ApprovalRequest, wait time.Duration) (ApprovalInfo, error) {
	info, err := a.RequestApproval(ctx, caller, run, req)
	if err != nil {
		return info, err
	}
	deadline := time.Now().Add(wait)
	for info.State == ApprovalPending {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return info, nil
		}
		if info, err = a.WaitApproval(ctx, caller, run, info.ID, min(left, MaxWait)); err != nil {
			return info, err
		}
	}
	if info.State != ApprovalApproved {
		return info, nil
	}
	return a.ConsumeApproval(ctx, caller, run, info.ID, ConsumeRequest{Args: req.Args})
}
