package cli

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// serveGCPercent is the garbage collector's target serve sets: the heap
// may grow to five times what is live before a cycle. custody's live
// heap is small (a few MB) and its binary large, so at Go's default (100)
// a cycle ran every few dozen gateway requests and marking was a fifth of
// the gateway's CPU.
const serveGCPercent = 400

// memoryLimitShare is the part of the container's memory limit serve
// gives the Go runtime as its soft limit: past it the collector runs as
// often as it must, whatever serveGCPercent says, so the larger target
// never gets the process killed.
const memoryLimitShare = 0.9

// cgroupMemoryMax is the cgroup v2 file holding the container's memory
// limit ("max" when there is none).
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// gcSettings is what serve sets: GC percent serveGCPercent unless $GOGC
// is set, and a soft memory limit of memoryLimitShare of the cgroup's
// memory.max unless $GOMEMLIMIT is set or there is no limit. percent or
// limit is 0 where it leaves the runtime's own value.
func gcSettings(getenv func(string) string, memMax string) (percent int, limit int64) {
	if getenv("GOGC") == "" {
		percent = serveGCPercent
	}
	if getenv("GOMEMLIMIT") == "" {
		if b, err := os.ReadFile(memMax); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
				limit = int64(float64(n) * memoryLimitShare)
			}
		}
	}
	return percent, limit
}

// applyGCSettings sets what gcSettings says and logs it; an operator
// overrides either with GOGC or GOMEMLIMIT in serve's environment.
func applyGCSettings(log *slog.Logger) {
	percent, limit := gcSettings(os.Getenv, cgroupMemoryMax)
	if percent != 0 {
		debug.SetGCPercent(percent)
	}
	if limit != 0 {
		debug.SetMemoryLimit(limit)
	}
	log.Info("garbage collector", "gc_percent", percent, "memory_limit_bytes", limit,
		"note", "0 leaves the runtime's value ($GOGC, $GOMEMLIMIT or its default)")
}
