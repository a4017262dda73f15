package main

import (
	"testing"
	"time"
)

func TestBenchLine(t *testing.T) {
	tests := []struct {
		name  string
		store string
		lv    level
		want  string
	}{
		{"all", "sqlite", level{clients: 8, decides: 2650, elapsed: time.Second, p50: 2500 * time.Microsecond, p99: 8100 * time.Microsecond, cpu: 2650 * 315 * time.Microsecond, commits: 384},
			"BenchmarkServeDecide/store=sqlite/clients=8\t    2650\t    377358 ns/op\t2650 decides/s\t2.500 p50-ms\t8.100 p99-ms\t6.9 decides/commit\t315 cpu-µs/decide"},
		{"no commits, no CPU", "postgres", level{clients: 128, decides: 5000, elapsed: time.Second, p50: 25 * time.Millisecond, p99: 41 * time.Millisecond, commits: -1},
			"BenchmarkServeDecide/store=postgres/clients=128\t    5000\t    200000 ns/op\t5000 decides/s\t25.000 p50-ms\t41.000 p99-ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := benchLine(tt.store, tt.lv); got != tt.want {
				t.Errorf("benchLine(%q, %+v) =\n%q, want\n%q", tt.store, tt.lv, got, tt.want)
			}
		})
	}
}
