// Command demo is `make demo`: it builds (or reuses) the local control
// plane, starts `custody serve` on the embedded SQLite store as the
// service account and RBAC in deploy/, creates the SandboxTemplate, warm
// pool and claims from deploy/base/sandbox, and runs the identity, memory, gateway and signer
// scenario against the real API server, printing one PASS/FAIL/SKIP line
// per check with the status and body observed. It exits 1 on any FAIL.
//
// Pods never run here (there is no kubelet), so a request "from inside a
// pod" is made by the demo with that pod's bound token, minted by
// TokenRequest exactly as the kubelet would project it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx))
}

func run(ctx context.Context) int {
	dir, err := os.MkdirTemp("", "custody-demo-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	fmt.Println("== building and starting the local control plane")
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
	srv, err := fixture.StartCustody(ctx, bin, dir, "--kubeconfig="+kc, "--kubernetes-namespaces="+fixture.Namespace,
		"--gateway-keys-dir="+keysDir, "--gateway-provider=anthropic="+provider.URL,
		"--policy-dir="+filepath.Join(root, "deploy", "base", "policies"), "--signer-idle="+demoIdle.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer srv.Stop()
	fmt.Printf("   custody API on %s, model gateway on %s (log: %s)\n\n", srv.URL, srv.GatewayURL, srv.Log)

	s := &scenario{env: env, url: srv.URL}
	s.run(ctx)
	fmt.Println()
	fmt.Println("== model gateway: per-execution tokens through sandboxd, revoked at exit")
	g := &gatewayScenario{scenario: s, env: env, custody: srv, custodyBin: bin, provider: provider, dir: dir}
	g.run(ctx)
	fmt.Println()
	fmt.Printf("== signer: decisions and a signed record that survives the Sandbox (idle_s = %v here)\n", demoIdle)
	sg := &signerScenario{scenario: s, env: env, custody: srv, custodyBin: bin, dir: dir}
	sg.run(ctx)
	fmt.Printf("\n%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
	if s.failed > 0 {
		fmt.Printf("custody log: see above; last lines:\n%s\n", tail(srv.Log, 3000))
		return 1
	}
	return 0
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
