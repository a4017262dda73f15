// Command coredns is CoreDNS (github.com/coredns/coredns, pinned in this
// directory's go.mod) with a trimmed plugin set, for the local cluster's
// node: it answers cluster names from the Kubernetes API and nothing else.
//
// The plugins are those listed in plugins below, run in CoreDNS's own order
// (core/dnsserver.Directives). There is deliberately no forward, grpc,
// etcd, cloud or other plugin that talks to anything but the API server:
// the node has no upstream resolver and its traffic stays on the machine.
// Any other directive in a Corefile, forward included, is an "Unknown
// directive" error. `coredns -plugins` lists these plus metadata,
// prometheus and transfer, which the kubernetes plugin links in but which
// are not directives here, so a Corefile cannot turn them on.
//
// It is built with CGO_ENABLED=0 (statically linked), since it runs as a
// one-layer image, by test/e2e/controlplane.BuildNode.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// plugins are the directives a Corefile may use; each is imported above.
var plugins = map[string]bool{
	"cache":      true,
	"errors":     true,
	"health":     true,
	"kubernetes": true,
	"log":        true,
	"ready":      true,
}

func init() {
	// Keep CoreDNS's execution order, restricted to the plugins built in.
	var order []string
	for _, d := range dnsserver.Directives {
		if plugins[d] {
			order = append(order, d)
		}
	}
	dnsserver.Directives = order
}

func main() {
	coremain.Run()
}
