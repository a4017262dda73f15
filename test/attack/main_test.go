package attack

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
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var err error
	workDir, err = os.MkdirTemp("", "custody-attack-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "workdir:", workDir)
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: filepath.Join(workDir, "cp"), Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer cp.Stop()
	env = &fixture.Env{CP: cp}
	if err := env.Setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	if custodyBin, err = fixture.BuildCustody(ctx, workDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if custody, err = startCustody(ctx, "main"); err != nil {
		fmt.Fprintln(os.Stderr, "custody:", err)
		return 1
	}
	code := m.Run()
	custody.Stop()
	// copy the log out for grepping
	b, _ := os.ReadFile(custody.Log)
	_ = os.WriteFile("/tmp/custody-attack.log", b, 0o600)
	os.RemoveAll(workDir)
	return code
}

func startCustody(ctx context.Context, name string, args ...string) (*fixture.Custody, error) {
	dir := filepath.Join(workDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	kc := filepath.Join(dir, "custody.kubeconfig")
	if err := env.CustodyKubeconfig(ctx, kc, 2*time.Hour); err != nil {
		return nil, err
	}
	all := append([]string{"--kubeconfig=" + kc, "--kubernetes-namespaces=" + fixture.Namespace}, args...)
	return fixture.StartCustody(ctx, custodyBin, dir, all...)
}
