package main

import (
	"fmt"
	"net"
	"os"

	"github.com/agentcustody/custody/internal/tcpfwd"
)

// forward accepts TCP on listen and copies each connection, both ways,
// to a new connection to target. It stands in, on the pod network, for a
// service that lives off it (the machine's PostgreSQL, the API server):
// traffic to a pod address is forwarded traffic, which NetworkPolicy
// agents police, while traffic to the node's own address is delivered
// locally, past kube-network-policies' postrouting hook.
func forward(listen, target string) int {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "netprobe:", err)
		return 1
	}
	fmt.Println("forwarding", ln.Addr(), "to", target)
	err = tcpfwd.Serve(ln, target, nil)
	fmt.Fprintln(os.Stderr, "netprobe:", err)
	return 1
}
