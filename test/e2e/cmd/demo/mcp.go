package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/incluster"
	"github.com/agentcustody/custody/test/e2e/netcheck"
	"github.com/agentcustody/custody/verify"
)

// mcpScenario is checks M1-M5: an unmodified MCP client (the go-sdk's)
// in a sandbox's name uses the upstream MCP server "docs" only through
// custody's MCP proxy; every tools/call is a signer decision before
// anything reaches the upstream, whose own call log says what did.
type mcpScenario struct {
	*scenario
	custody    *fixture.Custody
	custodyBin string
	dir        string
	// calls reads the upstream's own call log.
	calls func(ctx context.Context) ([]string, error)
}

// bearerRun adds the sandbox's custody key and the run to every request.
type bearerRun struct{ key, run string }

func (b bearerRun) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	r.Header.Set("Custody-Run", b.run)
	return fixture.HTTPClient().Transport.RoundTrip(r) // trusts the harness CA
}

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func (m *mcpScenario) run(ctx context.Context) {
	if err := m.env.CreateClaim(ctx, "mcp"); err != nil {
		m.failErr("M1", "create claim mcp", err)
		return
	}
	pod, err := m.env.ClaimPod(ctx, "mcp")
	if err != nil {
		m.failErr("M1", "claim mcp", err)
		return
	}
	_, k, err := m.exchange(ctx, pod)
	if err != nil || k.Key == "" {
		m.failErr("M1", "exchange for claim mcp", err)
		return
	}
	r, err := fixture.Do(ctx, "POST", m.url+"/v1/signer/runs", k.Key, nil)
	run := jsonField(r, "run")
	if err != nil || run == "" {
		m.fail("M1", "register a run", r, "want 201 with a run id")
		return
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: m.url + "/mcp/servers/docs", HTTPClient: &http.Client{Transport: bearerRun{k.Key, run}}}, nil)
	if err != nil {
		m.failErr("M1", "connect to custody's MCP proxy", err)
		return
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	var names []string
	if err == nil {
		for _, t := range tools.Tools {
			names = append(names, t.Name)
		}
	}
	if err != nil {
		m.failErr("M1", "tools/list", err)
		return
	}
	m.line("M1", "the sandbox's MCP client lists upstream docs' tools through custody (/mcp/servers/docs)", strings.Join(names, ",") == "search",
		fmt.Sprintf("%v (the upstream has search and delete_page)", names), "want only search: delete_page is a tool the policy can never allow")

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": "custody design"}})
	var calls []string
	if err == nil {
		calls, err = m.calls(ctx)
	}
	if err != nil {
		m.failErr("M2", "tools/call search", err)
		return
	}
	m.line("M2", "tools/call search {query: custody design}: allowed (AGENTS-MCP-001), forwarded",
		!res.IsError && toolText(res) == "3 pages match custody design" && strings.Join(calls, ",") == "search",
		fmt.Sprintf("result %q; the upstream's own call log: %v", toolText(res), calls), "want the upstream's answer and one call in its log")

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": "admin password"}})
	if err == nil {
		calls, err = m.calls(ctx)
	}
	if err != nil {
		m.failErr("M3", "tools/call search for a password", err)
		return
	}
	m.line("M3", "tools/call search {query: admin password}: denied by AGENTS-MCP-002, never reaches the upstream",
		res.IsError && strings.Contains(toolText(res), "AGENTS-MCP-002") && strings.Join(calls, ",") == "search",
		fmt.Sprintf("error result %.160q; the upstream's own call log: %v", toolText(res), calls), "want an error result naming the rule and still one call upstream")

	r, err = fixture.Do(ctx, "POST", m.url+"/v1/signer/runs/"+run+"/close", k.Key, nil)
	if err != nil || r.Status != http.StatusOK {
		m.fail("M4", "close the run", r, "want 200")
		return
	}
	m.recordM4(ctx, run)
	m.directM5()
}

// recordM4 exports the run and checks its records and verification.
func (m *mcpScenario) recordM4(ctx context.Context, run string) {
	admin := m.custody.AdminArgs()
	trust, bundle := filepath.Join(m.dir, "mcp-trust.json"), filepath.Join(m.dir, "mcp.bundle")
	if out, code := custodyCLI(ctx, m.custodyBin, append([]string{"trust", "-o", trust}, admin...)...); code != 0 {
		m.failErr("M4", "custody trust", fmt.Errorf("exit %d: %s", code, out))
		return
	}
	if out, code := custodyCLI(ctx, m.custodyBin, append([]string{"export", "--run", run, "-o", bundle}, admin...)...); code != 0 {
		m.failErr("M4", "custody export", fmt.Errorf("exit %d: %s", code, out))
		return
	}
	raw, err := os.ReadFile(bundle)
	if err != nil {
		m.failErr("M4", "read the bundle", err)
		return
	}
	b, err := verify.ParseBundle(raw)
	if err != nil {
		m.failErr("M4", "parse the bundle", err)
		return
	}
	var seen []string
	committed := false
	for _, e := range b.Records {
		rec, err := verify.ParseRecord(e.Record)
		if err != nil {
			m.failErr("M4", "parse a record", err)
			return
		}
		switch rec.Type {
		case verify.TypeCallDecided:
			seen = append(seen, fmt.Sprintf("call.decided %v %v %v", rec.Body["tool"], rec.Body["effect"], rec.Body["rule_ids"]))
		case verify.TypeCallCompleted:
			_, committed = rec.Body["result_commitment"].(string)
			seen = append(seen, fmt.Sprintf("call.completed %v (result as a commitment)", rec.Body["outcome"]))
		default:
			seen = append(seen, rec.Type)
		}
	}
	out, code := custodyCLI(ctx, m.custodyBin, "verify", bundle, "--trust", trust, "--run", run)
	m.line("M4", "both calls are in the run, signed; verified offline", code == 0 && out == "VERIFIED" && committed && len(seen) == 5 &&
		strings.Contains(seen[1], "allow") && strings.Contains(seen[3], "deny") && !strings.Contains(string(raw), "custody design"),
		strings.Join(seen, "; ")+"; custody verify: "+out, "want decided allow, completed with a result commitment, decided deny, and VERIFIED")
}

// directM5 reads check 5's probes for the upstream's pod.
func (m *mcpScenario) directM5() {
	if m.deploy == nil {
		m.skipped++
		fmt.Printf("SKIP M5  the sandbox cannot dial the MCP server itself: %s (pods do not run on the stand-in)\n", m.skipWhy)
		return
	}
	if m.net == nil {
		m.line("M5", "the sandbox cannot dial the MCP server itself", false, "check 5's probes did not run", "")
		return
	}
	c, _ := netcheck.Find(m.net.Canary, incluster.TMCP)
	sb, _ := netcheck.Find(m.net.Sandbox, incluster.TMCP)
	rl, _ := netcheck.Find(m.net.Relaxed, incluster.TMCP)
	m.line("M5", "the sandbox cannot dial the MCP server itself (its pod IP), only custody", c.Connected && sb.Blocked() && rl.Connected,
		fmt.Sprintf("canary: %s; sandbox: %s; sandbox with egress relaxed: %s", c.Observed, sb.Observed, rl.Observed),
		"want the canary and the relaxed probe connected, the sandbox not")
}

// callLog reads an mcpdocs upstream's call log at url.
func callLog(url string) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		r, err := fixture.Do(ctx, "GET", url, "", nil)
		if err != nil {
			return nil, err
		}
		var l struct{ Calls []string }
		if err := json.Unmarshal(r.Body, &l); err != nil {
			return nil, fmt.Errorf("upstream call log: %w", err)
		}
		return l.Calls, nil
	}
}
