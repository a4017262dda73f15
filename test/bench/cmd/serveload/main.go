// Command serveload measures the signer's decide over HTTP on a real
// `custody serve` (SQLite in a temporary directory, or PostgreSQL with
// -postgres), at each concurrency of -clients, beside floors measured
// in the same run: one fsync per decide (4 KiB write + fsync in the data
// directory). It prints, per level, decides/s, p50 and p99, decides per
// group commit (custody_signer_commits_total) and the server's CPU per
// decide. It talks to 127.0.0.1 only. `make bench` runs it.
//
// After the table it prints the same levels in the Go benchmark format
// (a "pkg:" line, then one line per level), for benchstat and
// test/bench/cmd/benchsum:
//
//	BenchmarkServeDecide/store=sqlite/clients=8 13250 377358 ns/op 2650 decides/s 2.500 p50-ms 8.100 p99-ms 6.9 decides/commit 315 cpu-µs/decide
//
// store is sqlite, or postgres with -postgres. The iteration count is the
// decides made at that level and ns/op is wall time over them (as with
// testing.B.RunParallel). decides/commit is left out when the server does
// not expose custody_signer_commits_total, cpu-µs/decide when /proc gave
// no CPU time.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/agentcustody/custody/test/bench/floor"
)

func main() {
	var (
		bin     = flag.String("custody", "", "custody binary (default: build ./cmd/custody)")
		clients = flag.String("clients", "1,8,32,128", "concurrency levels, comma-separated")
		dur     = flag.Duration("duration", 5*time.Second, "time per level")
		pgURL   = flag.String("postgres", "", "PostgreSQL server URL: run on a fresh schema there (dropped at the end) instead of SQLite")
		repo    = flag.String("repo", ".", "the repository root (for deploy/base/policies and ./cmd/custody)")
	)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, *bin, *repo, *pgURL, *clients, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin, repo, pgURL, clientList string, dur time.Duration) error {
	var levels []int
	for _, f := range strings.Split(clientList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-clients: %q is not a positive number", f)
		}
		levels = append(levels, n)
	}
	dir, err := os.MkdirTemp("", "custody-serveload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "custody")
		fmt.Println("building custody ...")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/custody")
		cmd.Dir, cmd.Stdout, cmd.Stderr = repo, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build custody: %w", err)
		}
	}
	dbURL := ""
	if pgURL != "" {
		u, drop, err := pgSchema(ctx, pgURL)
		if err != nil {
			return err
		}
		defer drop()
		dbURL = u
	}
	maxClients := 0
	for _, n := range levels {
		maxClients = max(maxClients, n)
	}
	s, err := startServer(ctx, bin, repo, dir, dbURL, maxClients)
	if err != nil {
		return err
	}
	defer s.stop()
	store, storeKey, floorName := "SQLite (synchronous=FULL)", "sqlite", "fsync"
	floorOf := func() (time.Duration, error) { return floor.Fsync(s.dataDir, 4096, 200) }
	if dbURL != "" {
		store, storeKey, floorName = "PostgreSQL", "postgres", "commit"
		floorOf = func() (time.Duration, error) { return floor.Commit(ctx, dbURL, 200) }
	}
	per, err := floorOf()
	if err != nil {
		return fmt.Errorf("%s floor: %w", floorName, err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxClients + 4, MaxConnsPerHost: 0}, Timeout: 30 * time.Second}
	fmt.Printf("signer decide over HTTP, %s, %s per level; %s floor %s (%.0f/s at one %s per decide)\n",
		store, dur, floorName, per.Round(time.Microsecond), float64(time.Second)/float64(per), floorName)
	fmt.Printf("%8s %10s %10s %10s %12s %12s %14s %8s\n", "clients", "decides/s", "p50", "p99", "x_floor_rate", "per_commit", "cpu/decide", "errors")
	var bench []string // one benchmark-format line per level, printed after the table
	for _, n := range levels {
		lv, err := runLevel(ctx, s, hc, n, dur)
		if err != nil {
			return err
		}
		perCommit := "n/a"
		if lv.commits > 0 {
			perCommit = fmt.Sprintf("%.1f", float64(lv.decides)/lv.commits)
		}
		cpu := time.Duration(0)
		if lv.decides > 0 {
			cpu = lv.cpu / time.Duration(lv.decides)
		}
		fmt.Printf("%8d %10.0f %10s %10s %12.2f %12s %14s %8d\n", n, lv.rate(),
			lv.p50.Round(10*time.Microsecond), lv.p99.Round(10*time.Microsecond),
			lv.rate()*per.Seconds(), perCommit, cpu.Round(time.Microsecond), lv.errs)
		if lv.errs > 0 {
			return fmt.Errorf("%d clients: %d decides failed, first: %s", n, lv.errs, lv.firstErr)
		}
		bench = append(bench, benchLine(storeKey, lv))
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		fmt.Println("pkg: " + bi.Path)
	}
	for _, l := range bench {
		fmt.Println(l)
	}
	return nil
}

// benchLine formats lv as one line of the Go benchmark format, named
// BenchmarkServeDecide/store=STORE/clients=N (see the package doc).
func benchLine(store string, lv level) string {
	b := fmt.Appendf(nil, "BenchmarkServeDecide/store=%s/clients=%d\t%8d", store, lv.clients, lv.decides)
	if lv.decides == 0 {
		return string(b)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b = fmt.Appendf(b, "\t%10.0f ns/op\t%.0f decides/s\t%.3f p50-ms\t%.3f p99-ms",
		float64(lv.elapsed)/float64(lv.decides), lv.rate(), ms(lv.p50), ms(lv.p99))
	if lv.commits > 0 {
		b = fmt.Appendf(b, "\t%.1f decides/commit", float64(lv.decides)/lv.commits)
	}
	if lv.cpu > 0 {
		b = fmt.Appendf(b, "\t%.0f cpu-µs/decide", float64(lv.cpu)/float64(time.Microsecond)/float64(lv.decides))
	}
	return string(b)
}
