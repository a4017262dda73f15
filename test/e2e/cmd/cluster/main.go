// Command cluster runs the local cluster in the foreground until Ctrl-C,
// so custody can be tried locally:
//
//	make cluster
//	export KUBECONFIG=<printed path>
//	custody serve --data-dir /tmp/custody
//
// By default that is the control plane plus a real node (kubelet,
// containerd, kube-proxy, CoreDNS, kube-network-policies; see
// test/e2e/realnode), torn down on exit. Where a real node cannot run it
// says why and runs the stand-in control plane (pods marked Ready, never
// run) instead; CUSTODY_NODE=standin asks for it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/realnode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir := os.Getenv("CUSTODY_CLUSTER_DIR")
	if dir == "" {
		dir = "custody-cluster"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if reason := realnode.Blocker(ctx, os.Stdout); reason != "" {
		fmt.Printf("no real node here: %s\nrunning the stand-in control plane (pods are marked Ready, never run)\n", reason)
		return standIn(ctx, dir)
	}
	root, err := fixture.RepoRoot()
	if err != nil {
		return err
	}
	c, err := realnode.Start(ctx, realnode.Options{ModuleDir: root, ControlPlaneDir: dir, Progress: os.Stdout})
	if err != nil {
		return err
	}
	fmt.Printf("\nnode %s Ready; admin kubeconfig: %s\n  export KUBECONFIG=%s\nnode logs in %s; Ctrl-C stops everything and restores the host\n",
		realnode.NodeName, c.CP.Kubeconfig, absPath(c.CP.Kubeconfig), c.Host.WorkDir)
	<-ctx.Done()
	fmt.Println("stopping: pods, node, control plane")
	return c.Stop(context.WithoutCancel(ctx))
}

func standIn(ctx context.Context, dir string) error {
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: dir, Progress: os.Stdout})
	if err != nil {
		return err
	}
	fmt.Printf("\nadmin kubeconfig: %s\n  export KUBECONFIG=%s\ncomponent logs in %s/*.log; Ctrl-C stops everything\n", cp.Kubeconfig, absPath(cp.Kubeconfig), dir)
	<-ctx.Done()
	fmt.Println("stopping control plane")
	cp.Stop()
	return nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
