// Package e2e runs custody against a real local control plane (see
// package controlplane): a real kube-apiserver, etcd, garbage collector
// and agent-sandbox controller, with custody talking to the API server as
// the service account and RBAC shipped in deploy/.
//
// These tests keep the stand-in node (pods marked Ready, never run) on
// purpose: they need what a real node does not give on demand — a pod
// held in Terminating while its containers are gone
// (TestGracefullyDeletingPodRefused), pods with forged owner references
// that no kubelet would run (forged_test.go), kube-controller-manager
// stopped mid-test (TestLeaseFencingAcrossPods), custody as a host
// process with flags changed per test (rate limits, RBAC removed, several
// replicas), and exchange floods whose timing a kubelet's CPU would
// disturb on 2 cores. Every one of them checks custody's answer to a
// token bound to a pod object, which is the same on either node. The
// flows that need a pod to really run are in test/e2e/onnode, on the real
// node.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

var (
	env        *fixture.Env
	custody    *fixture.Custody
	custodyBin string
	workDir    string
	// provider stands in for the Anthropic API behind custody's gateway;
	// the gateway holds providerKey for it.
	provider *fixture.ProviderStandIn
	keysDir  string
	// policyDir is deploy/base/policies (tenant "agents").
	policyDir string
)

const providerKey = "sk-ant-e2e-0000-not-a-real-key"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var err error
	workDir, err = os.MkdirTemp("", "custody-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("CUSTODY_E2E_KEEP") == "" {
		defer os.RemoveAll(workDir)
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: filepath.Join(workDir, "cp"), Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: control plane:", err)
		return 1
	}
	defer cp.Stop()
	env = &fixture.Env{CP: cp}
	if err := env.Setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setup:", err)
		return 1
	}
	if custodyBin, err = fixture.BuildCustody(ctx, workDir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	root, err := fixture.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	policyDir = filepath.Join(root, "deploy", "base", "policies")
	provider = fixture.NewProviderStandIn()
	defer provider.Close()
	keysDir = filepath.Join(workDir, "provider-keys")
	if err := os.MkdirAll(keysDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(keysDir, "anthropic"), []byte(providerKey), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if custody, err = startCustody(ctx, "main"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: custody:", err)
		return 1
	}
	defer custody.Stop()
	code := m.Run()
	if code != 0 {
		b, _ := os.ReadFile(custody.Log)
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		fmt.Fprintf(os.Stderr, "--- custody log (tail) ---\n%s\n", b)
	}
	return code
}

// startCustody starts a custody server as custody's own service account
// (deploy/base/rbac.yaml) with extra flags, in its own directory.
func startCustody(ctx context.Context, name string, args ...string) (*fixture.Custody, error) {
	dir := filepath.Join(workDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	kc := filepath.Join(dir, "custody.kubeconfig")
	if err := env.CustodyKubeconfig(ctx, kc, 2*time.Hour); err != nil {
		return nil, err
	}
	all := append([]string{"--kubeconfig=" + kc, "--kubernetes-namespaces=" + fixture.Namespace,
		"--gateway-keys-dir=" + keysDir, "--gateway-provider=anthropic=" + provider.URL,
		"--policy-dir=" + policyDir}, args...)
	return fixture.StartCustody(ctx, custodyBin, dir, all...)
}
