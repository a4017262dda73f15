package signer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/signer"
)

// BenchmarkDecideAppend measures decide+append throughput with durability
// on (SQLite synchronous=FULL, each caller acknowledged after its group
// commit) from many goroutines, beside the fsync floor measured in the
// same run: one fsync per record would cap at fsync_floor_records/s.
func BenchmarkDecideAppend(b *testing.B) {
	e := newEnv(b, nil)
	floor := fsyncFloor(b, e.dir)
	const runs = 16
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = e.register(agentTok)
	}
	var n atomic.Int64
	b.SetParallelism(64) // 64 × GOMAXPROCS concurrent callers
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			_, err := e.s.Decide(context.Background(), identity(), ids[i%runs], signer.DecideRequest{
				CallID: fmt.Sprintf("c%d", i), Tool: "Bash", Args: []byte(`{"command":"ls -la /tmp"}`)})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	b.ReportMetric(floor, "fsync_floor_records/s")
}

// fsyncFloor is 1/(mean time of a 4 KiB write + fsync) in dir.
func fsyncFloor(b *testing.B, dir string) float64 {
	f, err := os.Create(filepath.Join(dir, "fsync.probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	const n = 200
	start := time.Now()
	for range n {
		if _, err := f.WriteAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	return n / time.Since(start).Seconds()
}
