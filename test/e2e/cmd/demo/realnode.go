package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/incluster"
	"github.com/agentcustody/custody/test/e2e/realnode"
)

// runRealNode runs the scenario on a real node with custody in the
// cluster (see the package doc).
func runRealNode(ctx context.Context, dir string) (code int) {
	root, err := fixture.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	fmt.Println("== building and starting the local control plane and a real node (kubelet, containerd, kube-proxy, CoreDNS, kube-network-policies)")
	c, err := realnode.Start(ctx, realnode.Options{ModuleDir: root, Progress: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer func() {
		fmt.Println("== tearing the node down (pods deleted through the API, then host state restored)")
		if err := c.Stop(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(os.Stderr, "demo: teardown:", err)
			code = 1
		}
	}()
	fmt.Println("== deploying custody into the cluster: images, deploy/postgres with kustomize, its store, the provider stand-in")
	d, err := incluster.Deploy(ctx, c, incluster.Options{Dir: filepath.Join(dir, "incluster"), ProviderKey: demoProviderKey, SignerIdle: demoIdle, Progress: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer func() {
		if err := d.Stop(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
	}()
	fmt.Printf("   custody pod %s: API %s, model gateway %s, admin %s\n\n", d.Pod.Name, d.Custody.URL, d.Custody.GatewayURL, d.Custody.AdminURL)
	s := &scenario{env: &fixture.Env{CP: c.CP}, url: d.Custody.URL, deploy: d, mcpCalls: callLog(d.MCPCallsURL)}
	return s.all(ctx, d.Custody, d.Bin, dir, d.ProviderSeen, "pod "+d.ProviderIP+", Service "+d.ProviderURL, fmt.Sprintf("http://%s:%d/", d.ProviderIP, incluster.ProviderPort), func() string {
		return d.Logs(context.WithoutCancel(ctx), 3000)
	})
}
