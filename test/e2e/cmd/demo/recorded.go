package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/verify"
)

// recorded runs checks R1-R4: an agent registers a signer run and decides
// one Bash call; a process it starts with `custody exec` for that run
// (the token carries the run) calls the model, which asks for that call
// and for one the agent never decides; another process of the run
// fetches an internal address through the egress proxy, which decides
// (deny) and records it in the run. The gateway records the model call
// in the run by itself, and at close the signer reconciles: custody
// verify reports the one tool use never decided.
func (g *gatewayScenario) recorded(ctx context.Context, sb *execSandbox) {
	if err := g.env.CreateClaim(ctx, "recorded"); err != nil {
		g.failErr("R1", "create claim recorded", err)
		return
	}
	pod, err := g.env.ClaimPod(ctx, "recorded")
	if err != nil {
		g.failErr("R1", "claim recorded", err)
		return
	}
	_, k, err := g.exchange(ctx, pod)
	if err != nil || k.Key == "" {
		g.failErr("R1", "exchange for claim recorded", err)
		return
	}
	base := g.url + "/v1/signer/runs"
	r, err := fixture.Do(ctx, "POST", base, k.Key, nil)
	run := jsonField(r, "run")
	if err != nil || r.Status != http.StatusCreated || run == "" {
		g.fail("R1", "register a run", r, "want 201 with a run id")
		return
	}
	r, err = fixture.Do(ctx, "POST", base+"/"+run+"/decide", k.Key,
		map[string]any{"call_id": "c1", "tool": "Bash", "args": map[string]any{"command": "ls /workspace"}})
	if err != nil || jsonField(r, "effect") != "allow" {
		g.fail("R1", "decide c1 Bash ls /workspace", r, "want allow")
		return
	}
	x, err := sb.execWith(ctx, g.custodyBin, g.custody, fixture.ExecRun{RunID: run, Agent: k.Agent}, "-model", fixture.ToolUseModel)
	if err != nil {
		g.failErr("R1", "custody exec for the run", err)
		return
	}
	g.line("R1", fmt.Sprintf("run %s decided only c1 (Bash ls /workspace); a process of the run calls the model (custody exec exit %d)", run, x.ExitCode),
		x.ExitCode == 0 && strings.HasPrefix(x.Stdout, "200 ") && strings.Contains(x.Stdout, `"stop_reason":"tool_use"`),
		truncate(x.Stdout, 240), "want the model's 200 asking for two Bash tool uses")

	// The same run's process reaches for the provider stand-in, an
	// internal address, through the egress proxy (HTTP_PROXY from custody
	// exec --egress-proxy): decided, refused and recorded in the run.
	egressURL := sb.egressURL(g.custody)
	x, err = sb.execWith(ctx, g.custodyBin, g.custody, fixture.ExecRun{RunID: run, Agent: k.Agent, EgressProxy: egressURL}, "-fetch", g.providerURL)
	if err != nil {
		g.failErr("R2", "custody exec --egress-proxy", err)
		return
	}
	g.line("R2", fmt.Sprintf("a process of the run fetches %s through the egress proxy %s (custody exec exit %d)", g.providerURL, egressURL, x.ExitCode),
		x.ExitCode == 0 && strings.HasPrefix(x.Stdout, "403 destination refused: ") && strings.Contains(x.Stdout, "CUSTODY-NET-INTERNAL"),
		x.Stdout, "want 403 destination refused by CUSTODY-NET-INTERNAL, decided in the run")

	r, err = fixture.Do(ctx, "POST", base+"/"+run+"/close", k.Key, nil)
	if err != nil || r.Status != http.StatusOK {
		g.fail("R3", "close the run", r, "want 200")
		return
	}
	admin := g.custody.AdminArgs()
	trust, bundle := filepath.Join(g.dir, "recorded-trust.json"), filepath.Join(g.dir, "recorded.bundle")
	if out, code := custodyCLI(ctx, g.custodyBin, append([]string{"trust", "-o", trust}, admin...)...); code != 0 {
		g.failErr("R3", "custody trust", fmt.Errorf("exit %d: %s", code, out))
		return
	}
	if out, code := custodyCLI(ctx, g.custodyBin, append([]string{"export", "--run", run, "-o", bundle}, admin...)...); code != 0 {
		g.failErr("R3", "custody export", fmt.Errorf("exit %d: %s", code, out))
		return
	}
	raw, err := os.ReadFile(bundle)
	if err != nil {
		g.failErr("R3", "read the bundle", err)
		return
	}
	b, err := verify.ParseBundle(raw)
	if err != nil {
		g.failErr("R3", "parse the bundle", err)
		return
	}
	var types []string
	var call, egress *verify.Record
	for _, e := range b.Records {
		rec, err := verify.ParseRecord(e.Record)
		if err != nil {
			g.failErr("R3", "parse a record", err)
			return
		}
		types = append(types, rec.Type)
		switch {
		case rec.Type == verify.TypeModelCall:
			call = rec
		case rec.Type == verify.TypeCallDecided && rec.Body["tool"] == "Egress":
			egress = rec
		}
	}
	seen := "records: " + strings.Join(types, " ")
	ok := call != nil
	if ok {
		var uses []string
		for _, u := range call.Body["tool_uses"].([]any) {
			uses = append(uses, fmt.Sprint(u.(map[string]any)["name"]))
		}
		seen += fmt.Sprintf("; model.call: %v %v status %v, %v in / %v out tokens, stop %v, tool uses %v (arguments as commitments only)",
			call.Body["provider"], call.Body["model"], call.Body["status"], call.Body["input_tokens"], call.Body["output_tokens"], call.Body["stop_reason"], uses)
		ok = call.Body["status"] == int64(200) && len(uses) == 2 && !strings.Contains(string(raw), "169.254.169.254")
	}
	if ok = ok && egress != nil; ok {
		seen += fmt.Sprintf("; call.decided Egress %v %v", egress.Body["effect"], egress.Body["rule_ids"])
		ok = egress.Body["effect"] == "deny"
	}
	// The model call reaches the run through the inbox (within about
	// 350 ms), so it may come after the egress decision.
	order := strings.Join(types, " ")
	g.line("R3", "the gateway signed the model call into the run by itself, the egress proxy its decision; the close reconciled them", ok &&
		(order == "run.registered call.decided model.call call.decided run.reconciled run.closing" ||
			order == "run.registered call.decided call.decided model.call run.reconciled run.closing"), seen,
		"want model.call (two tool uses, no arguments in clear), the Egress deny, and run.reconciled before run.closing")

	out, code := custodyCLI(ctx, g.custodyBin, "verify", bundle, "--trust", trust, "--run", run)
	g.line("R4", "custody verify, offline", code == 0 && out == "VERIFIED (1 model-requested tool use never decided)",
		"custody verify: "+out, "want VERIFIED (1 model-requested tool use never decided): the curl to the metadata address was never decided")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
