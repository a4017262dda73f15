package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/egress"
	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/internal/signer"
)

// EgressTool is the tool name egress decisions are recorded under; a
// tenant policy allows destinations with rules on it (args: method, host,
// port, and url for plain HTTP).
const EgressTool = "Egress"

// newEgressProxy is the egress proxy's glue: the proxy credentials are
// RUN:CREDENTIAL, user name the signer run to record in and password
// either a custody key or, when this replica serves the gateway (gw not
// nil), a gateway token minted for that run (custody exec --egress-proxy
// puts HTTP_PROXY=http://RUN:TOKEN@custody:PORT in the process's
// environment; the token is revoked when the process exits, and the
// proxy refuses it from then on). A gateway token is accepted only for
// its own run_id, as its tenant and agent. Each request is a signer
// decision in the run. An ask waits, holding the request, for an
// operator's approval (signer.AwaitApproval, up to approvalWait): once
// consumed the destination is allowed; unresolved or denied, it is
// refused and the call completed as approval_timeout or approval_denied.
// Without a signer on this replica (standby) decisions fail and the
// proxy answers 503.
func newEgressProxy(keys *apikey.Service, gw *gateway.Gateway, current func() *signer.Signer, approvalWait time.Duration, log *slog.Logger) *egress.Proxy {
	return &egress.Proxy{
		Log:    log,
		Dialer: &egress.Dialer{},
		Authenticate: func(r *http.Request) (egress.Caller, error) {
			run, key, ok := proxyBasicAuth(r.Header.Get("Proxy-Authorization"))
			if !ok || run == "" {
				return egress.Caller{}, errors.New("egress: want Proxy-Authorization Basic RUN:KEY")
			}
			if gw != nil && strings.Count(key, ".") == 2 {
				c, err := gw.Authenticate(r.Context(), key)
				if err != nil {
					return egress.Caller{}, err
				}
				if c.RunID == "" || c.RunID != run {
					return egress.Caller{}, errors.New("egress: the gateway token is not for this run")
				}
				jti := c.ID
				return egress.Caller{
					Identity: apikey.Identity{Tenant: c.Tenant, Agent: c.Agent, Method: "gateway_token"}, Run: run,
					// Revoking the token (the process exited, the run
					// closed) cuts its tunnels too.
					Bind: func(ctx context.Context) (context.Context, func()) { return gw.Bind(ctx, jti) },
				}, nil
			}
			rec, err := keys.Verify(r.Context(), key)
			if err != nil {
				return egress.Caller{}, err
			}
			return egress.Caller{
				Identity: rec.Identity, Run: run,
				// Revoking the key (RevokeAgent, a holder's own revoke)
				// or closing the run cuts its tunnels too. (A gateway
				// token's are cut by its revocation, which closing its
				// run includes.)
				Bind: func(ctx context.Context) (context.Context, func()) {
					return bindKey(ctx, keys, key, func(ctx context.Context) bool {
						s := current()
						if s == nil {
							return false // a hand-over: nothing says the run closed
						}
						info, err := s.Status(ctx, rec.Identity, run)
						return err == nil && info.Closed
					})
				},
			}, nil
		},
		Decide: func(ctx context.Context, c egress.Caller, req egress.Request) (egress.Decision, error) {
			s := current()
			if s == nil {
				return egress.Decision{}, errors.New("egress: no signer on this replica")
			}
			args := map[string]any{"method": req.Method, "host": req.Host, "port": req.Port}
			if req.URL != "" {
				args["url"] = req.URL
			}
			raw, err := json.Marshal(args)
			if err != nil {
				return egress.Decision{}, err
			}
			var id [8]byte
			if _, err := rand.Read(id[:]); err != nil {
				return egress.Decision{}, err
			}
			callID := signer.EgressCallPrefix + hex.EncodeToString(id[:])
			d, err := s.Decide(ctx, c.Identity, c.Run, signer.DecideRequest{CallID: callID, Tool: EgressTool, Args: raw})
			if errors.Is(err, signer.ErrNotFound) || errors.Is(err, signer.ErrForbidden) {
				return egress.Decision{}, fmt.Errorf("run %q: %w", c.Run, egress.ErrCaller)
			}
			if err != nil {
				return egress.Decision{}, err
			}
			dec := egress.Decision{Allow: d.Effect == policy.Allow, RuleIDs: d.RuleIDs, CallID: callID}
			if d.Effect != policy.Ask {
				return dec, nil
			}
			a, err := signer.AwaitApproval(ctx, s, c.Identity, c.Run, signer.ApprovalRequest{CallID: callID, Tool: EgressTool, Args: raw}, approvalWait)
			if err != nil {
				return egress.Decision{}, fmt.Errorf("egress approval: %w", err)
			}
			log.InfoContext(ctx, "egress approval ended", "run", c.Run, "call_id", callID, "approval_id", a.ID, "state", a.State)
			switch a.State {
			case signer.ApprovalConsumed:
				dec.Allow = true
			case signer.ApprovalPending:
				_, err = s.Complete(context.WithoutCancel(ctx), c.Identity, c.Run, signer.CompleteRequest{CallID: callID, Outcome: "approval_timeout"})
			default:
				_, err = s.Complete(context.WithoutCancel(ctx), c.Identity, c.Run, signer.CompleteRequest{CallID: callID, Outcome: "approval_denied"})
			}
			if err != nil {
				log.WarnContext(ctx, "egress approval outcome not recorded", "run", c.Run, "call_id", callID, "err", err)
			}
			return dec, nil
		},
		// The outcome (the address actually dialled, or the dial-time
		// refusal) is the call's completion in the run.
		Complete: func(ctx context.Context, c egress.Caller, d egress.Decision, o egress.Outcome) error {
			s := current()
			if s == nil {
				return errors.New("egress: no signer on this replica")
			}
			_, err := s.Complete(ctx, c.Identity, c.Run, signer.CompleteRequest{CallID: d.CallID, Outcome: string(o)})
			return err
		},
	}
}

// keyRecheck is how often an open egress request or tunnel admitted with
// a custody key checks that the key is not revoked (apikey.Verify: a
// cache hit on this replica, evicted at once by a revocation).
const keyRecheck = 2 * time.Second

// bindKey ties ctx to key's life and its run's: the returned context is
// cancelled, with cause apikey.ErrRevoked once Verify finds key revoked,
// or signer.ErrRunClosed once runClosed reports the run closed (by the
// agent, an operator or the idle timeout, whose default equals the
// proxy's MaxTunnel: what the run no longer records must not go on).
// Expiry alone does not cut (a tunnel opened with a live key may outlive
// the key's TTL, bounded by MaxTunnel), nor does a store error.
func bindKey(ctx context.Context, keys *apikey.Service, key string, runClosed func(context.Context) bool) (context.Context, func()) {
	bctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(keyRecheck)
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
				if _, err := keys.Verify(bctx, key); errors.Is(err, apikey.ErrRevoked) {
					cancel(apikey.ErrRevoked)
					return
				}
				if runClosed(bctx) {
					cancel(signer.ErrRunClosed)
					return
				}
			}
		}
	}()
	return bctx, func() { cancel(nil) }
}

// proxyBasicAuth parses "Basic base64(user:password)".
func proxyBasicAuth(v string) (user, password string, ok bool) {
	b, found := strings.CutPrefix(v, "Basic ")
	if !found {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}
