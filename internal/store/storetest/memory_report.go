package storetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

// BenchSizes are the corpus sizes of the memory benchmarks, in memories.
var BenchSizes = []int{10_000, 100_000}

// BenchSizeName names a sub-benchmark of a corpus of n memories, e.g.
// "memories=10k".
func BenchSizeName(n int) string { return fmt.Sprintf("memories=%dk", n/1000) }

// SyncFloor measures the floor of a durable write: it writes 512 bytes
// at offset 0 of a file in dir and fsyncs it, as a store's commit must at
// least do. Create it with NewSyncFloor; it is not safe for concurrent
// use.
type SyncFloor struct {
	f   *os.File
	buf [512]byte
}

// NewSyncFloor creates the file sync-floor in dir, removed by Close.
func NewSyncFloor(dir string) (*SyncFloor, error) {
	f, err := os.OpenFile(filepath.Join(dir, "sync-floor"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sync floor: %w", err)
	}
	return &SyncFloor{f: f}, nil
}

// Measure writes and fsyncs 512 bytes and returns how long it took.
func (s *SyncFloor) Measure() (time.Duration, error) {
	start := time.Now()
	s.buf[0]++
	if _, err := s.f.WriteAt(s.buf[:], 0); err != nil {
		return 0, fmt.Errorf("sync floor: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return 0, fmt.Errorf("sync floor: %w", err)
	}
	return time.Since(start), nil
}

// Close closes and removes the file.
func (s *SyncFloor) Close() error {
	name := s.f.Name()
	s.f.Close()
	return os.Remove(name)
}

// ReportLatency reports, for latencies lat of the operation measured
// beside floor latencies measured in the same run (interleaved), the
// metrics p50-ms, p99-ms, floor-p50-ms, p50-x-floor and p99-x-floor. It
// sorts the slices it is given; it reports nothing for an empty lat, and
// no ratio for an empty floor.
func ReportLatency(b *testing.B, lat, floor []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	if len(floor) == 0 {
		return
	}
	f50, f99 := percentile(floor, 0.50), percentile(floor, 0.99)
	b.ReportMetric(f50, "floor-p50-ms")
	b.ReportMetric(p50/f50, "p50-x-floor")
	b.ReportMetric(p99/f99, "p99-x-floor")
}

// ReportP50Ratio reports the p50 of num over the p50 of den as metric
// unit, for two series measured in the same run (interleaved). It sorts
// the slices it is given; it reports nothing if either is empty.
func ReportP50Ratio(b *testing.B, num, den []time.Duration, unit string) {
	b.Helper()
	if len(num) == 0 || len(den) == 0 {
		return
	}
	b.ReportMetric(percentile(num, 0.50)/percentile(den, 0.50), unit)
}

// percentile sorts ds and returns its p-quantile (0 to 1) in milliseconds.
func percentile(ds []time.Duration, p float64) float64 {
	slices.Sort(ds)
	return float64(ds[int(p*float64(len(ds)-1))]) / float64(time.Millisecond)
}

// LogFloors logs the p50 of each query's floor latencies (per[i] for
// queries[i]). It sorts the slices it is given.
func LogFloors(b *testing.B, queries []memory.Query, per [][]time.Duration) {
	b.Helper()
	var report strings.Builder
	for j, ds := range per {
		if len(ds) > 0 {
			fmt.Fprintf(&report, " %q=%.2f", queries[j].Text, percentile(ds, 0.50))
		}
	}
	b.Logf("floor p50 ms by query:%s", report.String())
}

// BenchRecall runs the recall benchmark loop shared by both stores: each
// iteration recalls the next of RecallQueries (limit 10) with recall,
// then times floor on the same query (floor returns false when the query
// has no searchable term and nothing was run), and reports the latencies
// against the floor with LogFloors and ReportRecall for a corpus of n.
// The overall p50 and p99 compare the same mix of queries: only the
// recalls whose query has a floor are pooled (the per-query log shows
// every query).
func BenchRecall(b *testing.B, n int, recall func(memory.Query) error, floor func(memory.Query) (bool, error)) {
	queries := RecallQueries()
	var lat, floors []time.Duration
	per := make([][]time.Duration, len(queries))
	perFloor := make([][]time.Duration, len(queries))
	i := 0
	for b.Loop() {
		k := i % len(queries)
		q := queries[k]
		q.Limit = 10
		start := time.Now()
		if err := recall(q); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		per[k] = append(per[k], d)
		start = time.Now()
		ran, err := floor(q)
		if err != nil {
			b.Fatal(err)
		}
		if ran {
			lat = append(lat, d)
			d = time.Since(start)
			floors = append(floors, d)
			perFloor[k] = append(perFloor[k], d)
		}
		i++
	}
	LogFloors(b, queries, perFloor)
	ReportRecall(b, queries, per, lat, floors, n)
}
