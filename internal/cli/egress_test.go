package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/egress"
	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/signer"
)

// The egress glue against a real signer and key service on SQLite: the
// proxy credentials are RUN:KEY; a public destination is allowed by the
// tenant's rule on tool Egress, the metadata address is denied by the
// built-in rule (and through the proxy answered 403 with the rule ids,
// nothing dialled), a run that is not the caller's is a caller refusal
// (407), and a replica without a signer cannot decide (503).
func TestEgressGlue(t *testing.T) {
	ctx := context.Background()
	e := newSignerEnv(t, "rules:\n  - id: AGENTS-EGRESS\n    effect: allow\n    tool: Egress\n")
	keys, s, log := e.keys, e.s, e.log
	id := apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"}
	minted, err := keys.Mint(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.Register(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Register(ctx, apikey.Identity{Tenant: "agents", Agent: "b", Session: "q", Method: "static"})
	if err != nil {
		t.Fatal(err)
	}
	var cur *signer.Signer = s
	p := newEgressProxy(keys, nil, func() *signer.Signer { return cur }, time.Second, log)

	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	r := httptest.NewRequest("CONNECT", "http://example.com:443", nil)
	r.Header.Set("Proxy-Authorization", basic(run.Run, minted.Key))
	c, err := p.Authenticate(r)
	if err != nil || c.Identity != id || c.Run != run.Run {
		t.Fatalf("Authenticate = %+v, %v", c, err)
	}
	for _, bad := range []string{basic(run.Run, "ck_not-a-key"), basic("", minted.Key), "Bearer " + minted.Key, ""} {
		r.Header.Set("Proxy-Authorization", bad)
		if _, err := p.Authenticate(r); err == nil {
			t.Errorf("Authenticate accepted %q", bad)
		}
	}

	d, err := p.Decide(ctx, c, egress.Request{Method: "CONNECT", Host: "example.com", Port: 443})
	if err != nil || !d.Allow || !slices.Contains(d.RuleIDs, "AGENTS-EGRESS") {
		t.Errorf("public destination: %+v, %v; want allowed by AGENTS-EGRESS", d, err)
	}
	d, err = p.Decide(ctx, c, egress.Request{Method: "GET", Host: "169.254.169.254", Port: 80, URL: "http://169.254.169.254/latest/meta-data/"})
	if err != nil || d.Allow || !slices.Contains(d.RuleIDs, "CUSTODY-NET-METADATA") {
		t.Errorf("metadata destination: %+v, %v; want denied by CUSTODY-NET-METADATA", d, err)
	}
	if _, err := p.Decide(ctx, egress.Caller{Identity: id, Run: other.Run}, egress.Request{Method: "CONNECT", Host: "example.com", Port: 443}); !errors.Is(err, egress.ErrCaller) {
		t.Errorf("another agent's run: %v, want ErrCaller", err)
	}

	srv := httptest.NewServer(p)
	defer srv.Close()
	ask := func(target, auth string) (int, string) {
		req, _ := http.NewRequest("GET", target, nil)
		req.Header.Set("Proxy-Authorization", auth)
		tr := &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse(srv.URL) }}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := ask("http://169.254.169.254/latest/meta-data/", basic(run.Run, minted.Key)); code != http.StatusForbidden || !strings.Contains(body, "CUSTODY-NET-METADATA") {
		t.Errorf("through the proxy: %d %q, want 403 naming CUSTODY-NET-METADATA", code, body)
	}
	if code, _ := ask("http://169.254.169.254/", basic(other.Run, minted.Key)); code != http.StatusProxyAuthRequired {
		t.Errorf("another agent's run through the proxy: %d, want 407", code)
	}
	cur = nil
	if code, body := ask("http://169.254.169.254/", basic(run.Run, minted.Key)); code != http.StatusServiceUnavailable || strings.Contains(body, minted.Key) {
		t.Errorf("no signer: %d %q, want 503 without the key", code, body)
	}
}

// --egress-listen is documented, and refused without the signer.
func TestEgressListenFlag(t *testing.T) {
	ctx := context.Background()
	_, help, _ := runCLI(t, ctx, envMap(nil), "", "serve", "--help")
	if !strings.Contains(help, "--egress-listen") {
		t.Error("serve --help lacks --egress-listen")
	}
	code, _, stderr := runCLI(t, ctx, envMap(nil), "", "serve", "--signer=false", "--egress-listen=127.0.0.1:0")
	if code != 2 || !strings.Contains(stderr, "--egress-listen needs the signer") {
		t.Errorf("without the signer: exit %d, %q; want a usage error", code, stderr)
	}
}

// A gateway token minted for a run (what custody exec hands a process)
// is an egress credential for that run only, as the token's tenant and
// agent, until it is revoked.
func TestEgressGatewayToken(t *testing.T) {
	ctx := context.Background()
	e := newSignerEnv(t, "")
	keys, s, log, cfg := e.keys, e.s, e.log, e.cfg
	cfg.GatewayProviders = []string{"openai=http://127.0.0.1:1"}
	gw, meter, err := newGateway(ctx, cfg, e.db, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	defer meter.Close(ctx)
	defer gw.Close()
	run, err := s.Register(ctx, apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gw.Mint(ctx, gateway.Grant{Providers: []string{"openai"}, RunID: run.Run, Tenant: "agents", Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	p := newEgressProxy(keys, gw, func() *signer.Signer { return s }, time.Second, log)
	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	r := httptest.NewRequest("CONNECT", "http://example.com:443", nil)
	r.Header.Set("Proxy-Authorization", basic(run.Run, m.Token))
	c, err := p.Authenticate(r)
	if err != nil || c.Run != run.Run || c.Identity.Tenant != "agents" || c.Identity.Agent != "a" {
		t.Fatalf("Authenticate(run token) = %+v, %v", c, err)
	}
	if _, err := p.Decide(ctx, c, egress.Request{Method: "CONNECT", Host: "example.com", Port: 443}); err != nil {
		t.Fatalf("Decide with the run token's identity = %v", err)
	}
	r.Header.Set("Proxy-Authorization", basic("another-run", m.Token))
	if _, err := p.Authenticate(r); err == nil {
		t.Error("a run token was accepted for another run")
	}
	must(t, gw.Revoke(ctx, m.JTI))
	r.Header.Set("Proxy-Authorization", basic(run.Run, m.Token))
	if _, err := p.Authenticate(r); !errors.Is(err, gateway.ErrRevoked) {
		t.Errorf("revoked run token: %v, want ErrRevoked", err)
	}
}

// An egress request decided ask holds the connection while an operator
// decides: approved, the destination is allowed (the approval consumed);
// not resolved within the wait, it is refused and the call completed as
// approval_timeout.
func TestEgressAskWaitsForApproval(t *testing.T) {
	ctx := context.Background()
	e := newSignerEnv(t, "rules:\n  - id: AGENTS-EGRESS-ASK\n    effect: ask\n    tool: Egress\n")
	keys, s, log, db := e.keys, e.s, e.log, e.db
	id := apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"}
	run, err := s.Register(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p := newEgressProxy(keys, nil, func() *signer.Signer { return s }, 2*time.Second, log)
	c := egress.Caller{Identity: id, Run: run.Run}
	req := egress.Request{Method: "CONNECT", Host: "example.com", Port: 443}

	// An operator approves the pending approval.
	go func() {
		for range 100 {
			aps, _ := db.Approvals(ctx, run.Run)
			for _, a := range aps {
				if a.State == signer.ApprovalPending {
					s.ResolveApproval(ctx, a.ID, true)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	d, err := p.Decide(ctx, c, req)
	if err != nil || !d.Allow || !slices.Contains(d.RuleIDs, "AGENTS-EGRESS-ASK") {
		t.Fatalf("approved ask: %+v, %v; want allowed", d, err)
	}
	// Nobody answers: refused after the wait, completed approval_timeout.
	start := time.Now()
	d, err = p.Decide(ctx, c, req)
	if err != nil || d.Allow || time.Since(start) < 2*time.Second {
		t.Fatalf("unanswered ask: %+v, %v after %v; want refused after the 2s wait", d, err, time.Since(start))
	}
	leaves, err := db.RunLeaves(ctx, run.Run)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, l := range leaves {
		types = append(types, l.Type)
	}
	want := "run.registered call.decided approval.requested approval.resolved approval.consumed call.decided approval.requested call.completed"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("records %s, want %s", got, want)
	}
}
