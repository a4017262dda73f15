package signer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// BenchmarkDecideAppend measures decide+append throughput with durability
// on (SQLite synchronous=FULL, each caller acknowledged after its group
// commit) from many goroutines, beside the fsync floor measured in the
// same run: one fsync per record would cap at fsync_floor_records/s.
func BenchmarkDecideAppend(b *testing.B) {
	e := newEnv(b, nil)
	floor := fsyncFloor(b, e.dir)
	benchDecideAppend(b, e.s)
	b.ReportMetric(floor, "fsync_floor_records/s")
}

// BenchmarkDecideAppendPostgres is BenchmarkDecideAppend on the
// PostgreSQL store, appending through the writer lease as a replica does,
// beside the server's commit floor measured in the same run: one commit
// per record would cap at commit_floor_records/s.
func BenchmarkDecideAppendPostgres(b *testing.B) {
	db := openPG(b, 1)[0]
	r := startReplica(b, replicaDir(b), lease(b, db).Store())
	floor := commitFloor(b)
	benchDecideAppend(b, r.s)
	b.ReportMetric(floor, "commit_floor_records/s")
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

// commitFloor is 1/(mean time of a one-row INSERT committed on its own)
// on the test PostgreSQL server.
func commitFloor(b *testing.B) float64 {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Schema(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE commit_probe (x integer)"); err != nil {
		b.Fatal(err)
	}
	const n = 200
	start := time.Now()
	for range n {
		if _, err := conn.Exec(ctx, "INSERT INTO commit_probe VALUES (1)"); err != nil {
			b.Fatal(err)
		}
	}
	return n / time.Since(start).Seconds()
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
