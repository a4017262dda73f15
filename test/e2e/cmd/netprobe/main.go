// Command netprobe is the real node's network test image: one static
// binary with three modes.
//
//	netprobe serve ADDR          # accept TCP on ADDR (e.g. :8080), write "ok\n", close
//	netprobe dial ADDR TIMEOUT   # connect to ADDR within TIMEOUT (e.g. 2s) and read "ok"
//	netprobe lookup NAME TIMEOUT # resolve NAME (the pod's resolv.conf) every 300 ms until it answers or TIMEOUT
//	netprobe connect TIMEOUT SETTLE ADDR...  # wait SETTLE, then a TCP handshake with each ADDR, in parallel
//	netprobe forward LISTEN TARGET    # copy each TCP connection on LISTEN to TARGET
//	netprobe mcp-serve ADDR      # the demo's upstream MCP server (test/e2e/mcpdocs) on ADDR,
//	                             # demanding the credential in $MCP_CREDENTIAL
//
// dial exits 0 when it read "ok" and lookup when NAME resolved, 1 otherwise;
// both write what they observed ("connected to ... read ok", the addresses,
// or the error) to stdout and to /dev/termination-log when that exists, so the harness reads the result
// from the pod status without the kubelet's log API.
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentcustody/custody/test/e2e/mcpdocs"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "serve" {
		os.Exit(serve(os.Args[2]))
	}
	if len(os.Args) >= 4 && (os.Args[1] == "dial" || os.Args[1] == "lookup") {
		d, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "netprobe:", err)
			os.Exit(2)
		}
		f := dial
		if os.Args[1] == "lookup" {
			f = lookup
		}
		msg, code := f(os.Args[2], d)
		fmt.Println(msg)
		_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
		os.Exit(code)
	}
	if len(os.Args) == 3 && os.Args[1] == "mcp-serve" {
		u := &mcpdocs.Upstream{}
		fmt.Println("mcp upstream on", os.Args[2])
		srv := &http.Server{Addr: os.Args[2], Handler: u.Handler(os.Getenv("MCP_CREDENTIAL")), ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintln(os.Stderr, "netprobe:", srv.ListenAndServe())
		os.Exit(1)
	}
	if len(os.Args) == 4 && os.Args[1] == "forward" {
		os.Exit(forward(os.Args[2], os.Args[3]))
	}
	if len(os.Args) >= 5 && os.Args[1] == "connect" {
		d, err := time.ParseDuration(os.Args[2])
		settle, serr := time.ParseDuration(os.Args[3])
		if err != nil || serr != nil {
			fmt.Fprintln(os.Stderr, "netprobe: connect TIMEOUT SETTLE: want durations:", err, serr)
			os.Exit(2)
		}
		time.Sleep(settle)
		msg := connectAll(os.Args[4:], d)
		fmt.Print(msg)
		_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "usage: netprobe serve ADDR | netprobe dial ADDR TIMEOUT | netprobe lookup NAME TIMEOUT | netprobe connect TIMEOUT SETTLE ADDR... | netprobe forward LISTEN TARGET")
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

func lookup(name string, timeout time.Duration) (string, int) {
	start := time.Now()
	var last error
	for try := 1; time.Since(start) < timeout; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		cancel()
		if err == nil && len(addrs) > 0 {
			return fmt.Sprintf("%s -> %v after %s, try %d", name, addrs, time.Since(start).Round(time.Millisecond), try), 0
		}
		last = err
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Sprintf("%s: no answer in %s: %v", name, timeout, last), 1
}
