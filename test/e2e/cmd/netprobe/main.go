// Command netprobe is the real node's network test image: one static
// binary with two modes.
//
//	netprobe serve ADDR          # accept TCP on ADDR (e.g. :8080), write "ok\n", close
//	netprobe dial ADDR TIMEOUT   # connect to ADDR within TIMEOUT (e.g. 2s) and read "ok"
//
// dial exits 0 when it read "ok", 1 otherwise, and writes what it
// observed ("connected to ... read ok" or the dial error) to stdout and to
// /dev/termination-log when that exists, so the harness reads the result
// from the pod status without the kubelet's log API.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "serve" {
		os.Exit(serve(os.Args[2]))
	}
	if len(os.Args) >= 4 && os.Args[1] == "dial" {
		d, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "netprobe:", err)
			os.Exit(2)
		}
		msg, code := dial(os.Args[2], d)
		fmt.Println(msg)
		_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
		os.Exit(code)
	}
	fmt.Fprintln(os.Stderr, "usage: netprobe serve ADDR | netprobe dial ADDR TIMEOUT")
	os.Exit(2)
}

func serve(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "netprobe:", err)
		return 1
	}
	fmt.Println("serving on", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "netprobe:", err)
			return 1
		}
		go func() {
			defer c.Close()
			_, _ = c.Write([]byte("ok\n"))
		}()
	}
}

func dial(addr string, timeout time.Duration) (string, int) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return fmt.Sprintf("dial %s failed after %s: %v", addr, time.Since(start).Round(time.Millisecond), err), 1
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if strings.TrimSpace(line) != "ok" {
		return fmt.Sprintf("connected to %s but read %q (%v)", addr, line, err), 1
	}
	return fmt.Sprintf("connected to %s in %s, read ok", addr, time.Since(start).Round(time.Millisecond)), 0
}
