// Command demo is `make demo`: it builds (or reuses) the local control
// plane and runs the identity, memory, gateway and signer scenario of the
// seeds, printing one PASS/FAIL/SKIP line per check with the status and
// body observed. It exits 1 on any FAIL.
//
// By default it runs on a real node (test/e2e/realnode: kubelet,
// containerd, kube-proxy, CoreDNS, kube-network-policies; Linux, root and
// Debian's runtime packages, which it installs with apt-get when missing):
// custody runs as a pod from deploy/postgres applied with kustomize
// (test/e2e/incluster), the sandboxes' pods really run the agent process
// with the projected token, and checks 5 and G2 probe the network for real
// (test/e2e/netcheck). Requests "from inside a pod" that the checks need
// to see answered are made by the demo with that pod's bound token,
// minted by TokenRequest exactly as the kubelet projects it.
//
// Where a real node cannot run (not Linux, not root, packages missing and
// not installable, or CUSTODY_NODE=standin), it says why and falls back to
// the stand-in control plane, where pods never run: custody then runs as a
// host process and checks 5 and G2 are SKIPped with that reason.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentcustody/custody/test/e2e/realnode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
	start := time.Now()
	var code int
	if reason := realnode.Blocker(ctx, os.Stdout); reason == "" {
		code = runRealNode(ctx, dir)
	} else {
		fmt.Printf("== no real node here: %s\n   falling back to the stand-in control plane: pods do not run; checks 5 and G2 are SKIPped\n", reason)
		code = runStandIn(ctx, dir, reason)
	}
	fmt.Printf("demo took %s\n", time.Since(start).Round(time.Second))
	return code
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (s *scenario) summary() {
	fmt.Printf("\n%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
}
