package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// result is one benchmark line.
type result struct {
	// pkg is the import path of the last "pkg:" line before the result,
	// "" if there was none since the last "ok"/"FAIL" line of go test.
	pkg string
	// name is the benchmark's name without its -GOMAXPROCS suffix, e.g.
	// "BenchmarkRecall/memories=10k".
	name string
	// metrics are the values by unit, e.g. "ns/op", "p50-x-floor".
	metrics map[string]float64
}

// parse reads the Go benchmark format from r: a line
//
//	NAME ITERATIONS VALUE UNIT [VALUE UNIT ...]
//
// with NAME starting with "Benchmark" is one result. A "pkg: PATH" line
// sets the package of the results after it, until the next "pkg:" line
// or the "ok"/"FAIL" line with which go test ends a package. Every other
// line is ignored, as is a line that starts like a result but is not one
// — except that when go test's "NAME\t" is followed by output the
// benchmark printed itself, a later line "ITERATIONS VALUE UNIT ..."
// completes it. The error is only r's.
func parse(r io.Reader) ([]result, error) {
	var (
		out     []result
		pkg     string
		pending string // a benchmark name whose numbers have not come yet
	)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "pkg: "):
				pkg, pending = strings.TrimSpace(strings.TrimPrefix(line, "pkg: ")), ""
			case strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "ok\t") || strings.HasPrefix(line, "FAIL"):
				pkg, pending = "", ""
			case strings.HasPrefix(line, "Benchmark"):
				f := strings.Fields(line)
				if m, ok := parseMetrics(f[1:]); ok {
					out = append(out, result{pkg: pkg, name: stripProcs(f[0]), metrics: m})
					pending = ""
				} else {
					pending = stripProcs(f[0])
				}
			case pending != "":
				if m, ok := parseMetrics(strings.Fields(line)); ok {
					out = append(out, result{pkg: pkg, name: pending, metrics: m})
					pending = ""
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read benchmark output: %w", err)
		}
	}
}

// parseMetrics parses "ITERATIONS VALUE UNIT [VALUE UNIT ...]".
func parseMetrics(f []string) (map[string]float64, bool) {
	if len(f) < 1 || len(f)%2 != 1 {
		return nil, false
	}
	if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
		return nil, false
	}
	m := make(map[string]float64, len(f)/2)
	for i := 1; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, false
		}
		m[f[i+1]] = v
	}
	return m, true
}

// stripProcs removes the "-N" that go test appends to a benchmark's name
// when GOMAXPROCS is N > 1: "BenchmarkX/a=1-2" is "BenchmarkX/a=1".
func stripProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}
