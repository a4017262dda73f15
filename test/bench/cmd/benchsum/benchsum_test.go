package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// sqliteRun is captured from
//
//	go test -run '^$' -bench 'BenchmarkRecall/memories=10k|BenchmarkRemember/memories=10k' -benchtime 200x ./internal/store/sqlite
const sqliteRun = `goos: linux
goarch: amd64
pkg: github.com/agentcustody/custody/internal/store/sqlite
cpu: Oxide Virtual Turin-like Processor             
BenchmarkRemember/memories=10k-2         	     200	   1902797 ns/op	         0.2268 floor-p50-ms	         0.9623 p50-ms	         4.243 p50-x-floor	        15.62 p99-ms	        21.23 p99-x-floor
BenchmarkRecall/memories=10k-2           	     200	   3293590 ns/op	         0.3608 floor-p50-ms	         9.429 max-query-p99-ms	         0.7509 p50-ms	         2.081 p50-x-floor	         8.882 p99-ms	         0.3384 p99-x-floor
--- BENCH: BenchmarkRecall/memories=10k-2
    memory_report.go:135: floor p50 ms by query: "postgres migration"=0.52 "dark theme editor"=0.55
    memory_report.go:136: 10000 memories in the index, 200 recalls
PASS
ok  	github.com/agentcustody/custody/internal/store/sqlite	1.765s
`

// postgresRun has the PostgreSQL store's lines (values made up, format
// as sqliteRun's): the same benchmark names, another package.
const postgresRun = `goos: linux
goarch: amd64
pkg: github.com/agentcustody/custody/internal/store/postgres
cpu: Oxide Virtual Turin-like Processor             
BenchmarkRemember/memories=10k-2         	     200	   1902797 ns/op	         1.500 p50-x-floor
BenchmarkRecall/memories=10k-2           	     200	   3293590 ns/op	         9.429 max-query-p99-ms	         1.100 p50-x-floor
PASS
ok  	github.com/agentcustody/custody/internal/store/postgres	1.765s
`

// gatewayRun is captured from
//
//	go test -run '^$' -bench 'BenchmarkCPUPerRequest|BenchmarkAddedLatency' -benchtime 200x -count 3 ./internal/gateway
const gatewayRun = `goos: linux
goarch: amd64
pkg: github.com/agentcustody/custody/internal/gateway
cpu: Oxide Virtual Turin-like Processor             
BenchmarkAddedLatency-2    	     200	    401233 ns/op	        -3.797 added-p50-µs	       292.7 added-p99-µs	       150.3 floor-p50-µs	       146.5 gw-p50-µs	         0.9747 p50-x-floor	         1.341 p99-x-floor
BenchmarkAddedLatency-2    	     200	    392483 ns/op	       -13.91 added-p50-µs	      -245.9 added-p99-µs	       129.0 floor-p50-µs	       115.0 gw-p50-µs	         0.8922 p50-x-floor	         0.7481 p99-x-floor
BenchmarkAddedLatency-2    	     200	    385280 ns/op	       -34.88 added-p50-µs	       130.8 added-p99-µs	       150.0 floor-p50-µs	       115.2 gw-p50-µs	         0.7675 p50-x-floor	         1.160 p99-x-floor
BenchmarkCPUPerRequest-2   	     200	    457751 ns/op	         0.7881 cpu-ratio	        51.98 direct-cpu-µs/req	       182.5 floor-allocs/req	       270.9 floor-cpu-µs/req	       224.2 gw-allocs/req	       213.5 gw-cpu-µs/req	         1.425 proxy-allocs-ratio	         0.7377 proxy-cpu-ratio
BenchmarkCPUPerRequest-2   	     200	    506949 ns/op	         0.9454 cpu-ratio	        92.47 direct-cpu-µs/req	       182.7 floor-allocs/req	       255.6 floor-cpu-µs/req	       224.3 gw-allocs/req	       241.6 gw-cpu-µs/req	         1.424 proxy-allocs-ratio	         0.9145 proxy-cpu-ratio
BenchmarkCPUPerRequest-2   	     200	    459889 ns/op	         0.8481 cpu-ratio	        87.94 direct-cpu-µs/req	       182.5 floor-allocs/req	       239.8 floor-cpu-µs/req	       224.3 gw-allocs/req	       203.3 gw-cpu-µs/req	         1.426 proxy-allocs-ratio	         0.7602 proxy-cpu-ratio
PASS
ok  	github.com/agentcustody/custody/internal/gateway	0.708s
`

// serveloadRun is serveload's output (values made up, format as
// benchLine's), after the kubeauth package's "ok" line.
const serveloadRun = `ok  	github.com/agentcustody/custody/internal/kubeauth	9.1s
building custody ...
signer decide over HTTP, SQLite (synchronous=FULL), 5s per level; fsync floor 1.2ms (830/s at one fsync per decide)
 clients  decides/s        p50        p99 x_floor_rate   per_commit     cpu/decide   errors
       8       2650     2.50ms     8.10ms         3.19          6.9          315µs        0
     128       4980    25.00ms    41.00ms         5.99         55.0          250µs        0
pkg: github.com/agentcustody/custody/test/bench/cmd/serveload
BenchmarkServeDecide/store=sqlite/clients=8	   13250	    377358 ns/op	2650 decides/s	2.500 p50-ms	10.000 p99-ms	6.9 decides/commit	315 cpu-µs/decide
BenchmarkServeDecide/store=sqlite/clients=128	   24900	    200803 ns/op	4980 decides/s	25.000 p50-ms	41.000 p99-ms	55.0 decides/commit	250 cpu-µs/decide
`

func TestParse(t *testing.T) {
	rs, err := parse(strings.NewReader(sqliteRun + gatewayRun + serveloadRun))
	if err != nil {
		t.Fatalf("parse() error = %v", err)
	}
	type want struct {
		pkg, name, metric string
		value             float64
	}
	wants := []want{
		{"github.com/agentcustody/custody/internal/store/sqlite", "BenchmarkRemember/memories=10k", "p50-x-floor", 4.243},
		{"github.com/agentcustody/custody/internal/store/sqlite", "BenchmarkRecall/memories=10k", "max-query-p99-ms", 9.429},
		{"github.com/agentcustody/custody/internal/gateway", "BenchmarkAddedLatency", "added-p50-µs", -3.797},
		{"github.com/agentcustody/custody/internal/gateway", "BenchmarkAddedLatency", "p99-x-floor", 0.7481},
		{"github.com/agentcustody/custody/internal/gateway", "BenchmarkAddedLatency", "p99-x-floor", 1.160},
		{"github.com/agentcustody/custody/internal/gateway", "BenchmarkCPUPerRequest", "cpu-ratio", 0.7881},
		{"github.com/agentcustody/custody/internal/gateway", "BenchmarkCPUPerRequest", "cpu-ratio", 0.9454},
		{"github.com/agentcustody/custody/internal/gateway", "BenchmarkCPUPerRequest", "cpu-ratio", 0.8481},
		{"github.com/agentcustody/custody/test/bench/cmd/serveload", "BenchmarkServeDecide/store=sqlite/clients=8", "decides/s", 2650},
		{"github.com/agentcustody/custody/test/bench/cmd/serveload", "BenchmarkServeDecide/store=sqlite/clients=128", "cpu-µs/decide", 250},
	}
	if len(rs) != 2+3+3+2 {
		t.Errorf("parse() = %d results, want 10", len(rs))
	}
	used := make([]bool, len(rs))
	for _, w := range wants {
		found := false
		for i, r := range rs {
			if !used[i] && r.pkg == w.pkg && r.name == w.name && r.metrics[w.metric] == w.value {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("parse() has no result %s %s %s = %v; got %+v", w.pkg, w.name, w.metric, w.value, rs)
		}
	}
}

func TestParseLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []result // metrics compared on ns/op only
	}{
		{"procs suffix", "BenchmarkX/a=1-16 10 5 ns/op\n", []result{{name: "BenchmarkX/a=1"}}},
		{"no procs suffix", "BenchmarkX/clients=128 10 5 ns/op\n", []result{{name: "BenchmarkX/clients=128"}}},
		{"hyphenated name", "BenchmarkX/a-b 10 5 ns/op\n", []result{{name: "BenchmarkX/a-b"}}},
		{"no trailing newline", "BenchmarkX 10 5 ns/op", []result{{name: "BenchmarkX"}}},
		{"CRLF", "pkg: a/b\r\nBenchmarkX-2 10 5 ns/op\r\n", []result{{pkg: "a/b", name: "BenchmarkX"}}},
		{"ok ends the package", "pkg: a/b\nok  \ta/b\t1s\nBenchmarkX 10 5 ns/op\n", []result{{name: "BenchmarkX"}}},
		{"FAIL ends the package", "pkg: a/b\nFAIL\ta/b\t1s\nBenchmarkX 10 5 ns/op\n", []result{{name: "BenchmarkX"}}},
		{"not a number", "BenchmarkX 10 five ns/op\n", nil},
		{"unit missing", "BenchmarkX 10 5 ns/op 7\n", nil},
		{"BENCH log", "--- BENCH: BenchmarkX-2\n    x.go:1: 10 5 ns/op\n", nil},
		{"numbers split from the name", "BenchmarkX-2 \tstarting control plane\nready\n     10\t  5 ns/op\n", []result{{name: "BenchmarkX"}}},
		{"split numbers not after a name", "     10\t  5 ns/op\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("parse(%q) error = %v", tt.in, err)
			}
			if len(rs) != len(tt.want) {
				t.Fatalf("parse(%q) = %+v, want %+v", tt.in, rs, tt.want)
			}
			for i, r := range rs {
				if r.pkg != tt.want[i].pkg || r.name != tt.want[i].name || r.metrics["ns/op"] != 5 {
					t.Errorf("parse(%q)[%d] = %+v, want %+v with 5 ns/op", tt.in, i, r, tt.want[i])
				}
			}
		})
	}
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := parse(io.MultiReader(strings.NewReader(sqliteRun), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Errorf("parse() error = %v, want %v", err, boom)
	}
	if err := run(iotest.ErrReader(boom), io.Discard); !errors.Is(err, boom) {
		t.Errorf("run() error = %v, want %v", err, boom)
	}
}

// outcomeOf returns the outcome of the check of name and metric in pkg.
func outcomeOf(t *testing.T, outs []outcome, pkg, name, metric string) outcome {
	t.Helper()
	for _, o := range outs {
		if o.pkg == pkg && o.name == name && o.metric == metric {
			return o
		}
	}
	t.Fatalf("no check %s %s %s", pkg, name, metric)
	return outcome{}
}

func TestEvaluate(t *testing.T) {
	rs, err := parse(strings.NewReader(sqliteRun + postgresRun + gatewayRun + serveloadRun))
	if err != nil {
		t.Fatal(err)
	}
	outs := evaluate(checks, rs)
	tests := []struct {
		pkg, name, metric string
		result            string  // met, not met, missing, reported
		value             float64 // when not missing
		n                 int     // values found
	}{
		// The same benchmark names in two packages: each check sees its own.
		{"internal/store/sqlite", "BenchmarkRemember/memories=10k", "p50-x-floor", "not met", 4.243, 1},
		{"internal/store/postgres", "BenchmarkRemember/memories=10k", "p50-x-floor", "met", 1.5, 1},
		{"internal/store/sqlite", "BenchmarkRecall/memories=10k", "p50-x-floor", "not met", 2.081, 1},
		{"internal/store/postgres", "BenchmarkRecall/memories=10k", "p50-x-floor", "met", 1.1, 1},
		// 100k did not run.
		{"internal/store/sqlite", "BenchmarkRecall/memories=100k", "max-query-p99-ms", "missing", 0, 0},
		{"internal/store/postgres", "BenchmarkRemember/memories=100k", "p50-x-floor", "missing", 0, 0},
		// -count 3: the median.
		{"internal/gateway", "BenchmarkCPUPerRequest", "cpu-ratio", "met", 0.8481, 3},
		{"internal/gateway", "BenchmarkAddedLatency", "p99-x-floor", "met", 1.160, 3},
		{"internal/gateway", "BenchmarkCPUPerRequest", "gw-allocs/req", "reported", 224.3, 3},
		// p99-ms < 10: exactly 10 is not met.
		{"", "BenchmarkServeDecide/store=sqlite/clients=8", "p99-ms", "not met", 10, 1},
		{"", "BenchmarkServeDecide/store=sqlite/clients=8", "decides/s", "met", 2650, 1},
		{"", "BenchmarkServeDecide/store=sqlite/clients=128", "decides/s", "not met", 4980, 1},
		{"", "BenchmarkServeDecide/store=postgres/clients=128", "decides/s", "missing", 0, 0},
		{"internal/kubeauth", "BenchmarkExchange", "p50_x_floor", "missing", 0, 0},
	}
	for _, tt := range tests {
		o := outcomeOf(t, outs, tt.pkg, tt.name, tt.metric)
		got := "not met"
		switch {
		case o.missing():
			got = "missing"
		case o.op == report:
			got = "reported"
		case o.met():
			got = "met"
		}
		if got != tt.result || len(o.values) != tt.n || (tt.n > 0 && o.value != tt.value) {
			t.Errorf("evaluate(%s %s %s) = %s, %v of %v, want %s, %v of %d values",
				tt.pkg, tt.name, tt.metric, got, o.value, o.values, tt.result, tt.value, tt.n)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{0.9454, 0.7881, 0.8481}, 0.8481},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", in, got, tt.want)
		}
		for i := range in {
			if tt.in[i] != in[i] {
				t.Errorf("median(%v) modified its input to %v", in, tt.in)
				break
			}
		}
	}
}

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(strings.NewReader(sqliteRun+postgresRun+gatewayRun+serveloadRun), &out); err != nil {
		t.Fatalf("run() error = %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	// met: remember 10k and recall 10k on PostgreSQL, the gateway's two,
	// 8 clients' decides/s on SQLite.
	if got, want := lines[len(lines)-1], "5 of 16 targets met"; got != want {
		t.Errorf("run() last line = %q, want %q", got, want)
	}
	// Header, column names, one line per check, the count.
	if got, want := len(lines), 2+len(checks)+1; got != want {
		t.Errorf("run() = %d lines, want %d:\n%s", got, want, out.String())
	}
	for _, want := range []string{
		"identity exchange p50_x_floor",
		"0.848 (median of 3)",
		"<= 1.2",
		">= 2126",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run() output has no %q:\n%s", want, out.String())
		}
	}
	for _, l := range lines[2 : len(lines)-1] {
		if strings.Contains(l, "p50_x_floor") && !strings.HasSuffix(l, " missing") {
			t.Errorf("run() exchange line = %q, want it missing", l)
		}
		if !strings.HasSuffix(l, " met") && !strings.HasSuffix(l, " missing") && !strings.HasSuffix(l, " reported") {
			t.Errorf("run() line %q does not end in a result", l)
		}
	}
}

func TestChecks(t *testing.T) {
	if got, want := len(checks), 16+8; got != want {
		t.Errorf("len(checks) = %d, want %d (16 targets; PostgreSQL's decide, gw-allocs/req and SQLite's remember transaction floor only reported)", got, want)
	}
	for _, c := range checks {
		if c.op < report || c.op > below {
			t.Errorf("check %s %s: op %d", c.name, c.metric, c.op)
		}
		if stripProcs(c.name) != c.name || !strings.HasPrefix(c.name, "Benchmark") {
			t.Errorf("check name %q is not a benchmark name without -N", c.name)
		}
	}
}
