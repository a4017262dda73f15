// Command controlplane-build builds the local control-plane binaries
// pinned in tools/go.mod into the cache (see controlplane.Build), showing
// progress. The first build takes about 15 minutes on 2 cores; later runs
// find everything cached.
//
// With -node it builds the real node's binaries instead (see
// controlplane.BuildNode: kubelet, kube-proxy, kube-scheduler, CoreDNS and
// the patched kube-network-policies; about 15 more minutes the first time)
// and prints where each one is. Every node binary is smoke-checked, so
// `make node-binaries` is also the manual check that they run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/agentcustody/custody/test/e2e/controlplane"
)

func main() {
	node := flag.Bool("node", false, "build the node binaries (kubelet, kube-proxy, kube-scheduler, coredns, kube-network-policies) instead of the control plane")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *node {
		bins, err := controlplane.BuildNode(ctx, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "controlplane-build -node:", err)
			os.Exit(1)
		}
		fmt.Println("node binaries ready and smoke-checked:")
		for _, name := range []string{controlplane.Kubelet, controlplane.KubeProxy, controlplane.KubeScheduler, controlplane.CoreDNS, controlplane.NetworkPolicyAgent} {
			fmt.Printf("  %-22s %s\n", name, bins[name])
		}
		return
	}
	bins, err := controlplane.Build(ctx, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlplane-build:", err)
		os.Exit(1)
	}
	fmt.Printf("control plane binaries ready in %s\n", filepath.Dir(bins["kube-apiserver"]))
}
