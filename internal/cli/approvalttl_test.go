package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

// TestApprovalTTLFlag: --approval-ttl (CUSTODY_APPROVAL_TTL) is validated
// and documented, and reaches the signer: an approval requested on a
// signer built from the config expires after it (issue 8: it was a fixed
// hour).
func TestApprovalTTLFlag(t *testing.T) {
	ctx := context.Background()
	for _, v := range []string{"0s", "-1m", "500ms", "169h"} {
		code, _, stderr := runCLI(t, ctx, envMap(nil), "", "serve", "--approval-ttl="+v)
		if code != 2 || !strings.Contains(stderr, "--approval-ttl") {
			t.Errorf("serve --approval-ttl=%s = exit %d, %q; want a usage error naming --approval-ttl", v, code, stderr)
		}
	}
	code, _, stderr := runCLI(t, ctx, envMap(map[string]string{"CUSTODY_APPROVAL_TTL": "0s"}), "", "serve")
	if code != 2 || !strings.Contains(stderr, "approval-ttl") {
		t.Errorf("CUSTODY_APPROVAL_TTL=0s: exit %d, %q; want a usage error", code, stderr)
	}
	_, help, _ := runCLI(t, ctx, envMap(nil), "", "serve", "--help")
	if !strings.Contains(help, "--approval-ttl") || !strings.Contains(help, "1h0m0s") {
		t.Errorf("serve --help lacks --approval-ttl and its default")
	}

	dir := t.TempDir()
	pdir := filepath.Join(dir, "policies")
	must(t, os.MkdirAll(pdir, 0o700))
	must(t, os.WriteFile(filepath.Join(pdir, "agents.yaml"), []byte("rules:\n  - id: A-1\n    effect: ask\n    tool: Deploy\n"), 0o600))
	db, err := sqlite.Open(ctx, filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := Defaults()
	cfg.DataDir, cfg.PolicyDir, cfg.ApprovalTTL = filepath.Join(dir, "data"), pdir, 2*time.Minute
	s, err := newSigner(ctx, cfg, db, slog.New(slog.DiscardHandler), nil, signerHooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"}
	run, err := s.Register(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"env":"prod"}`)
	if d, err := s.Decide(ctx, id, run.Run, signer.DecideRequest{CallID: "c1", Tool: "Deploy", Args: args}); err != nil || d.Effect != "ask" {
		t.Fatalf("Decide = %+v, %v; want ask", d, err)
	}
	before := time.Now()
	ap, err := s.RequestApproval(ctx, id, run.Run, signer.ApprovalRequest{CallID: "c1", Tool: "Deploy", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if ttl := ap.ExpiresAt.Sub(before); ttl < 2*time.Minute-time.Second || ttl > 2*time.Minute+time.Second {
		t.Errorf("approval expires %v after it was requested, want --approval-ttl 2m0s", ttl)
	}
}
