package signer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/test/bench/floor"
)

// BenchmarkDecideAppend measures decide+append throughput with durability
// on (SQLite synchronous=FULL, each caller acknowledged after its group
// commit) from many goroutines, beside the fsync floor measured in the
// same run: one fsync per record would cap at fsync_floor_records/s.
func BenchmarkDecideAppend(b *testing.B) {
	e := newEnv(b, nil)
	d, err := floor.Fsync(e.dir, 4096, 200)
	if err != nil {
		b.Fatal(err)
	}
	rate := float64(time.Second) / float64(d)
	benchDecideAppend(b, e.s)
	b.ReportMetric(rate, "fsync_floor_records/s")
}

// BenchmarkDecideAppendPostgres is BenchmarkDecideAppend on the
// PostgreSQL store, appending through the writer lease as a replica does,
// beside the server's commit floor measured in the same run: one commit
// per record would cap at commit_floor_records/s.
func BenchmarkDecideAppendPostgres(b *testing.B) {
	db := openPG(b, 1)[0]
	r := startReplica(b, replicaDir(b), lease(b, db).Store())
	d, err := floor.Commit(context.Background(), pgtest.Schema(b), 200)
	if err != nil {
		b.Fatal(err)
	}
	rate := float64(time.Second) / float64(d)
	benchDecideAppend(b, r.s)
	b.ReportMetric(rate, "commit_floor_records/s")
}

// benchDecideAppend decides b.N calls on s, spread over 16 runs, from
// 64 × GOMAXPROCS goroutines, and reports records/s.
func benchDecideAppend(b *testing.B, s *signer.Signer) {
	const runs = 16
	ids := make([]string, runs)
	for i := range ids {
		info, err := s.Register(context.Background(), identity())
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = info.Run
	}
	var n atomic.Int64
	b.SetParallelism(64) // 64 × GOMAXPROCS concurrent callers
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			_, err := s.Decide(context.Background(), identity(), ids[i%runs], signer.DecideRequest{
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
}
