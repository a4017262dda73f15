package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
)

func tokenRecord(jti string, issued time.Time, ttl time.Duration) gateway.TokenRecord {
	return gateway.TokenRecord{
		JTI: jti, IssuedAt: issued, ExpiresAt: issued.Add(ttl),
		Providers: []string{"anthropic"}, RunID: "run-" + jti, Tenant: "agents", Agent: "agent-" + jti,
	}
}

func TestGatewayRevocations(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0).UTC()
	for _, r := range []gateway.TokenRecord{
		tokenRecord("a", now, time.Hour),
		tokenRecord("b", now, time.Hour),
		tokenRecord("short", now, time.Minute),
	} {
		if err := db.RecordToken(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RecordToken(ctx, tokenRecord("a", now, time.Hour)); err == nil {
		t.Error("RecordToken(duplicate jti) = nil, want an error")
	}
	if _, err := db.RevokeToken(ctx, "never-minted", now); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("RevokeToken(unknown) = %v, want ErrNotFound", err)
	}
	ra, err := db.RevokeToken(ctx, "a", now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if ra.JTI != "a" || ra.Seq <= 0 || !ra.RevokedAt.Equal(now.Add(time.Minute)) || !ra.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("RevokeToken(a) = %+v", ra)
	}
	again, err := db.RevokeToken(ctx, "a", now.Add(2*time.Minute))
	if err != nil || again != ra {
		t.Errorf("RevokeToken(a) again = %+v, %v; want the first revocation %+v", again, err, ra)
	}
	rs, err := db.RevokeToken(ctx, "short", now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Seq <= ra.Seq {
		t.Errorf("second revocation seq %d not after first %d", rs.Seq, ra.Seq)
	}
	all, err := db.ListRevocations(ctx, 0)
	if err != nil || len(all) != 2 || all[0] != ra || all[1] != rs {
		t.Fatalf("ListRevocations(0) = %+v, %v; want [a short]", all, err)
	}
	after, err := db.ListRevocations(ctx, ra.Seq)
	if err != nil || len(after) != 1 || after[0].JTI != "short" {
		t.Errorf("ListRevocations(%d) = %+v, %v; want [short]", ra.Seq, after, err)
	}
	if none, _ := db.ListRevocations(ctx, rs.Seq); len(none) != 0 {
		t.Errorf("ListRevocations(last) = %+v, want none", none)
	}

	// Durable across a reopen.
	db.Close()
	db, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all, err = db.ListRevocations(ctx, 0)
	if err != nil || len(all) != 2 || all[0] != ra {
		t.Fatalf("ListRevocations after reopen = %+v, %v", all, err)
	}

	// Prune removes what expired before the cut-off; seq is never reused.
	n, err := db.PruneExpired(ctx, now.Add(30*time.Minute))
	if err != nil || n != 2 { // the "short" token and its revocation
		t.Errorf("PruneExpired = %d, %v; want 2 rows", n, err)
	}
	if _, err := db.RevokeToken(ctx, "short", now); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("RevokeToken(pruned) = %v, want ErrNotFound", err)
	}
	rb, err := db.RevokeToken(ctx, "b", now)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Seq <= rs.Seq {
		t.Errorf("seq after prune = %d, want > %d (never reused)", rb.Seq, rs.Seq)
	}
	all, _ = db.ListRevocations(ctx, 0)
	if len(all) != 2 || all[0].JTI != "a" || all[1].JTI != "b" {
		t.Errorf("ListRevocations after prune = %+v, want [a b]", all)
	}
}
