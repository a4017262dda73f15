//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package verify_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, the process has used so
// far, or 0 when it cannot tell.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
