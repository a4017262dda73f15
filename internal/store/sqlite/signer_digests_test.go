package sqlite

import (
	"bytes"
	"context"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
)

// TestSignerDigestsByLeafMigration: digests written by a binary from
// before migration 12 (schema version 11, a run column and an index on
// it) read back the same after the upgrade, each under its own run, and
// the table is left with its one b-tree.
func TestSignerDigestsByLeafMigration(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	preDigestsByLeaf(t, dir,
		`INSERT INTO signer_leaves (idx, run, run_seq, type, record) VALUES
			(0, 'r1', 0, 'call.decided', x'00'), (1, 'r2', 0, 'model.call', x'01'), (2, 'r1', 1, 'model.call', x'02')`,
		`INSERT INTO signer_arg_digests (run, idx, pos, kind, tool, digest) VALUES
			('r1', 2, 1, 'requested', 'Read', NULL),
			('r1', 0, 0, 'decided', 'Bash', x'0707'),
			('r2', 1, 0, 'model_call', '', NULL),
			('r1', 2, 0, 'requested', 'Bash', x'0808'),
			('r1', 2, 0, 'model_call', '!', NULL)`)
	db := openSignerTestDB(t, dir)
	var version, indexes int
	var ddl string
	if err := db.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil || version != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", version, err, len(migrations))
	}
	if err := db.db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'signer_arg_digests'),
		(SELECT sql FROM sqlite_schema WHERE name = 'signer_arg_digests')`).Scan(&indexes, &ddl); err != nil {
		t.Fatal(err)
	}
	if indexes != 0 || !bytes.Contains([]byte(ddl), []byte("WITHOUT ROWID")) {
		t.Fatalf("after the migration: %d indexes on signer_arg_digests, table %s", indexes, ddl)
	}
	want := map[string][]signer.ArgDigest{
		"r1": {
			{Run: "r1", Index: 0, Pos: 0, Kind: "decided", Tool: "Bash", Digest: []byte{7, 7}},
			{Run: "r1", Index: 2, Pos: 0, Kind: "model_call", Tool: "!"},
			{Run: "r1", Index: 2, Pos: 0, Kind: "requested", Tool: "Bash", Digest: []byte{8, 8}},
			{Run: "r1", Index: 2, Pos: 1, Kind: "requested", Tool: "Read"},
		},
		"r2": {{Run: "r2", Index: 1, Pos: 0, Kind: "model_call", Tool: ""}},
	}
	for run, w := range want {
		got, err := db.ArgDigests(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(w) {
			t.Fatalf("ArgDigests(%s) = %+v, want %+v", run, got, w)
		}
		for i := range w {
			g := got[i]
			if g.Run != w[i].Run || g.Index != w[i].Index || g.Pos != w[i].Pos || g.Kind != w[i].Kind ||
				g.Tool != w[i].Tool || !bytes.Equal(g.Digest, w[i].Digest) || (g.Digest == nil) != (w[i].Digest == nil) {
				t.Fatalf("ArgDigests(%s)[%d] = %+v, want %+v", run, i, g, w[i])
			}
		}
	}
}
