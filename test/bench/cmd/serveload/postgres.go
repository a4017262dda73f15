package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgSchema creates an empty schema custody_bench_<random> on the server
// at base and returns base with search_path set to it, and a function
// that drops it.
func pgSchema(ctx context.Context, base string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	name := "custody_bench_" + randHex(8)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, fmt.Errorf("-postgres: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// commitFloor is the mean time of a one-row INSERT committed on its own
// on the server at dbURL: what a decide would pay alone if each were
// committed by itself.
func commitFloor(ctx context.Context, dbURL string) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE commit_probe (x integer)"); err != nil {
		return 0, err
	}
	defer conn.Exec(ctx, "DROP TABLE commit_probe")
	const n = 200
	start := time.Now()
	for range n {
		if _, err := conn.Exec(ctx, "INSERT INTO commit_probe VALUES (1)"); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / n, nil
}
