// Command controlplane-build builds the local control-plane binaries
// pinned in tools/go.mod into the cache (see controlplane.Build), showing
// progress. The first build takes about 15 minutes on 2 cores; later runs
// find everything cached.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/agentcustody/custody/test/e2e/controlplane"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bins, err := controlplane.Build(ctx, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlplane-build:", err)
		os.Exit(1)
	}
	fmt.Printf("control plane binaries ready in %s\n", filepath.Dir(bins["kube-apiserver"]))
}
