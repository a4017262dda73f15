// Command cluster runs the local control plane (etcd, kube-apiserver,
// kube-controller-manager, agent-sandbox controller, kubelet stand-in) in
// the foreground until Ctrl-C, so custody can be tried locally:
//
//	make cluster
//	export KUBECONFIG=<printed path>
//	custody serve --data-dir /tmp/custody
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/agentcustody/custody/test/e2e/controlplane"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := os.Getenv("CUSTODY_CLUSTER_DIR")
	if dir == "" {
		dir = "custody-cluster"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: dir, Progress: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	fmt.Printf("\nadmin kubeconfig: %s\n  export KUBECONFIG=%s\ncomponent logs in %s/*.log; Ctrl-C stops everything\n", cp.Kubeconfig, absPath(cp.Kubeconfig), dir)
	<-ctx.Done()
	fmt.Println("stopping control plane")
	cp.Stop()
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
