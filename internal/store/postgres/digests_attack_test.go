package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
)

// TestAttackLeaflessBatchDigests: Extends now also runs on batches
// without leaves. One with only meta (or approvals) still commits; one
// that also carries a digest is refused as a conflict and commits none of
// its meta; a leafed batch after the refusal still commits.
func TestAttackLeaflessBatchDigests(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	if err := db.AppendBatch(ctx, &signer.Batch{Meta: map[string]string{"k": "v1"}}); err != nil {
		t.Fatalf("meta-only batch: %v", err)
	}
	bad := signer.Batch{Meta: map[string]string{"k": "v2"},
		Digests: []signer.ArgDigest{{Run: "r1", Index: 0, Kind: signer.DigestDecided, Tool: "Evil"}}}
	if err := db.AppendBatch(ctx, &bad); !errors.Is(err, signer.ErrLogConflict) {
		t.Fatalf("leafless batch with a digest: %v, want ErrLogConflict", err)
	}
	if v, err := db.Meta(ctx, "k"); err != nil || v != "v1" {
		t.Fatalf("meta after the refused batch = %q, %v; want v1", v, err)
	}
	good := signer.Batch{
		NewRuns: []signer.RunRow{{ID: "r1", Tenant: "t", Agent: "a", Session: "s", Identity: []byte(`{}`)}},
		Leaves:  []signer.Leaf{{Index: 0, Run: "r1", RunSeq: 0, Type: "run.registered", Record: []byte{1}}},
		Digests: []signer.ArgDigest{{Run: "r1", Index: 0, Kind: signer.DigestDecided, Tool: "Bash", Digest: []byte{1}}},
	}
	if err := db.AppendBatch(ctx, &good); err != nil {
		t.Fatalf("leafed batch after the refusal: %v", err)
	}
	if ds, err := db.ArgDigests(ctx, "r1"); err != nil || len(ds) != 1 || ds[0].Tool != "Bash" {
		t.Fatalf("ArgDigests = %+v, %v", ds, err)
	}
}
