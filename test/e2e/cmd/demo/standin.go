package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/mcpdocs"
)

// runStandIn is the fallback: the stand-in control plane (pods marked
// Ready, never run) and custody as a host process; skipWhy is printed
// with checks 5 and G2.
func runStandIn(ctx context.Context, dir, skipWhy string) int {
	fmt.Println("== building and starting the local control plane (stand-in node)")
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: filepath.Join(dir, "cp"), Progress: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer cp.Stop()
	env := &fixture.Env{CP: cp}
	fmt.Println("== applying deploy/base/namespace.yaml, deploy/base/rbac.yaml, deploy/base/sandbox/{serviceaccount,sandboxtemplate,sandboxwarmpool}.yaml")
	if err := env.Setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	fmt.Println("== building custody and starting `custody serve` as system:serviceaccount:custody-system:custody")
	bin, err := fixture.BuildCustody(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	root, err := fixture.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	kc := filepath.Join(dir, "custody.kubeconfig")
	if err := env.CustodyKubeconfig(ctx, kc, time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	// The model provider cannot be reached from here: a local stand-in
	// answers like the real API does to an invalid key. The gateway holds
	// a demo key for it in a keys directory (a mounted Secret in a cluster).
	provider := fixture.NewProviderStandIn()
	defer provider.Close()
	keysDir := filepath.Join(dir, "provider-keys")
	if err := os.MkdirAll(keysDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(keysDir, "anthropic"), []byte(demoProviderKey), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	// The upstream MCP server "docs", with the credential custody injects.
	mcpUp := httptest.NewServer((&mcpdocs.Upstream{}).Handler(demoMCPCredential))
	defer mcpUp.Close()
	mcpConf := filepath.Join(dir, "mcp-upstreams.yaml")
	if err := os.WriteFile(filepath.Join(dir, "mcp-credential"), []byte(demoMCPCredential), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	if err := os.WriteFile(mcpConf, []byte("upstreams:\n  - name: docs\n    url: "+mcpUp.URL+"/mcp\n    tenants: [agents]\n    credential: {file: "+
		filepath.Join(dir, "mcp-credential")+"}\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	srv, err := fixture.StartCustody(ctx, bin, dir, "--kubeconfig="+kc, "--kubernetes-namespaces="+fixture.Namespace,
		"--gateway-keys-dir="+keysDir, "--gateway-provider=anthropic="+provider.URL, "--mcp-upstreams="+mcpConf,
		"--policy-dir="+filepath.Join(root, "deploy", "base", "policies"), "--signer-idle="+demoIdle.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer srv.Stop()
	fmt.Printf("   custody API on %s, model gateway on %s (log: %s)\n\n", srv.URL, srv.GatewayURL, srv.Log)

	s := &scenario{env: env, url: srv.URL, skipWhy: skipWhy, mcpCalls: callLog(mcpUp.URL + "/calls")}
	return s.all(ctx, srv, bin, dir, standInSeen(provider), provider.URL, provider.URL+"/", func() string { return tail(srv.Log, 3000) })
}

// demoMCPCredential is what custody injects into its calls to the
// stand-in demo's upstream MCP server (never in the sandbox).
const demoMCPCredential = "mcp-docs-demo-credential-0000"

// standInSeen reports what the loopback stand-in received, as digests.
func standInSeen(p *fixture.ProviderStandIn) providerSeen {
	return func(context.Context) ([]string, []bool, error) {
		keys, auths := p.Seen()
		var sums []string
		var has []bool
		for i := range keys {
			sums = append(sums, sha256Hex(keys[i]))
			has = append(has, auths[i] != "")
		}
		return sums, has, nil
	}
}
