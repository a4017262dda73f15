// Package onnode holds the end-to-end tests that need pods to really run:
// a real node (test/e2e/realnode) with custody deployed into the cluster
// from deploy/postgres (test/e2e/incluster). The sandbox's own agent
// process exchanges its projected token, a deleted claim's containers are
// really stopped, and the sandbox's NetworkPolicy is really enforced.
//
// The tests in test/e2e keep the stand-in node: they need what a real
// node does not give on demand (a pod held in Terminating by a finalizer
// while its containers are gone, forged owner references on pods no
// kubelet runs, the garbage collector stopped mid-test).
//
// A real node needs Linux, root and Debian's runtime packages (installed
// with apt-get when missing). Where it cannot run, every test here skips
// with the reason, except under CI=true, where that is a failure. Only one
// real node runs on a machine at a time: do not run `make demo` and these
// tests at once.
package onnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/incluster"
	"github.com/agentcustody/custody/test/e2e/realnode"
)

const providerKey = "sk-ant-onnode-0000-not-a-real-key"

var (
	cluster *realnode.Cluster
	dep     *incluster.Deployment
	env     *fixture.Env
	// noNode is why the real node cannot run here ("" when it runs).
	noNode string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if noNode = realnode.Blocker(ctx, os.Stderr); noNode != "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "onnode: FAIL: CI must run the real node, and it cannot here: %s\n", noNode)
			return 1
		}
		fmt.Fprintf(os.Stderr, "onnode: every test skips: no real node here: %s\n", noNode)
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "custody-onnode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := fixture.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster, err = realnode.Start(ctx, realnode.Options{ModuleDir: root, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "onnode:", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(os.Stderr, "onnode: teardown:", err)
			code = 1
		}
	}()
	env = &fixture.Env{CP: cluster.CP}
	dep, err = incluster.Deploy(ctx, cluster, incluster.Options{Dir: dir, ProviderKey: providerKey, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "onnode:", err)
		return 1
	}
	defer func() {
		if err := dep.Stop(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(os.Stderr, "onnode:", err)
		}
	}()
	code = m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- custody log (tail) ---\n%s\n", dep.Logs(context.WithoutCancel(ctx), 8000))
	}
	return code
}

// need skips t, with the reason, where no real node runs (never in CI:
// TestMain fails there first).
func need(t *testing.T) context.Context {
	t.Helper()
	if noNode != "" {
		t.Skipf("no real node here: %s", noNode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
