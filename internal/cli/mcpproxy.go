package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcpproxy"
	"github.com/agentcustody/custody/internal/signer"
)

// newMCPProxy is the MCP proxy's glue (/mcp/servers/{name} on the API
// listener): the upstreams file of --mcp-upstreams, keys checked by the
// key service, and every decision taken by the signer this replica runs
// now; on a standby replica calls are refused (fail closed).
func newMCPProxy(cfg ServeConfig, keys *apikey.Service, current func() *signer.Signer, log *slog.Logger) (*mcpproxy.Proxy, error) {
	c, err := mcpproxy.LoadConfig(cfg.MCPUpstreams)
	if err != nil {
		return nil, err
	}
	return mcpproxy.New(mcpproxy.Options{
		Config:       c,
		Recorder:     slotRecorder{current},
		Verify:       keys.Verify,
		ApprovalWait: cfg.ProxyApprovalWait,
		Log:          log,
	})
}

// slotRecorder is the signer of a signerSlot as an mcpproxy.Recorder:
// mcpproxy.ErrUnavailable while the replica stands by.
type slotRecorder struct{ current func() *signer.Signer }

var _ mcpproxy.Recorder = slotRecorder{}

func (r slotRecorder) signer() (*signer.Signer, error) {
	if s := r.current(); s != nil {
		return s, nil
	}
	return nil, mcpproxy.ErrUnavailable
}

func (r slotRecorder) Register(ctx context.Context, c apikey.Identity) (signer.RunInfo, error) {
	s, err := r.signer()
	if err != nil {
		return signer.RunInfo{}, err
	}
	return s.Register(ctx, c)
}

func (r slotRecorder) Status(ctx context.Context, c apikey.Identity, run string) (signer.RunInfo, error) {
	s, err := r.signer()
	if err != nil {
		return signer.RunInfo{}, err
	}
	return s.Status(ctx, c, run)
}

func (r slotRecorder) MayAllow(ctx context.Context, tenant, tool string) (bool, error) {
	s, err := r.signer()
	if err != nil {
		return false, err
	}
	return s.MayAllow(ctx, tenant, tool)
}

func (r slotRecorder) Decide(ctx context.Context, c apikey.Identity, run string, req signer.DecideRequest) (signer.DecideResponse, error) {
	s, err := r.signer()
	if err != nil {
		return signer.DecideResponse{}, err
	}
	return s.Decide(ctx, c, run, req)
}

func (r slotRecorder) RequestApproval(ctx context.Context, c apikey.Identity, run string, req signer.ApprovalRequest) (signer.ApprovalInfo, error) {
	s, err := r.signer()
	if err != nil {
		return signer.ApprovalInfo{}, err
	}
	return s.RequestApproval(ctx, c, run, req)
}

func (r slotRecorder) WaitApproval(ctx context.Context, c apikey.Identity, run, id string, wait time.Duration) (signer.ApprovalInfo, error) {
	s, err := r.signer()
	if err != nil {
		return signer.ApprovalInfo{}, err
	}
	return s.WaitApproval(ctx, c, run, id, wait)
}

func (r slotRecorder) ConsumeApproval(ctx context.Context, c apikey.Identity, run, id string, req signer.ConsumeRequest) (signer.ApprovalInfo, error) {
	s, err := r.signer()
	if err != nil {
		return signer.ApprovalInfo{}, err
	}
	return s.ConsumeApproval(ctx, c, run, id, req)
}

func (r slotRecorder) Complete(ctx context.Context, c apikey.Identity, run string, req signer.CompleteRequest) (signer.Appended, error) {
	s, err := r.signer()
	if err != nil {
		return signer.Appended{}, err
	}
	return s.Complete(ctx, c, run, req)
}

func (r slotRecorder) CloseRun(ctx context.Context, c apikey.Identity, run string) (signer.Appended, error) {
	s, err := r.signer()
	if err != nil {
		return signer.Appended{}, err
	}
	return s.CloseRun(ctx, c, run)
}
