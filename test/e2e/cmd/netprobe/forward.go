package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
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
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "netprobe:", err)
			return 1
		}
		go pipe(c.(*net.TCPConn), target)
	}
}

func pipe(c *net.TCPConn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		_ = up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.CloseWrite()
	<-done
}
