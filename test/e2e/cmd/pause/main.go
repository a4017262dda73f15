// Command pause is the local node's pod sandbox (pause) image: PID 1 of
// every pod's shared namespaces. It sleeps until SIGTERM or SIGINT and,
// as PID 1, reaps any child that is reparented to it (SIGCHLD). It is a
// static Go binary built into custody.local/pause by the harness, so no
// pause image is pulled from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
