package cli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

// signerEnv is a real key service and signer on SQLite in a test's
// directory, with policy as tenant "agents"' policy file ("" for none),
// closed when the test ends.
type signerEnv struct {
	dir  string
	cfg  ServeConfig
	db   *sqlite.DB
	keys *apikey.Service
	s    *signer.Signer
	log  *slog.Logger
}

func newSignerEnv(t *testing.T, policy string) *signerEnv {
	t.Helper()
	ctx := context.Background()
	e := &signerEnv{dir: t.TempDir(), log: slog.New(slog.DiscardHandler)}
	e.cfg = Defaults()
	e.cfg.DataDir = filepath.Join(e.dir, "data")
	if policy != "" {
		e.cfg.PolicyDir = filepath.Join(e.dir, "policies")
		must(t, os.MkdirAll(e.cfg.PolicyDir, 0o700))
		must(t, os.WriteFile(filepath.Join(e.cfg.PolicyDir, "agents.yaml"), []byte(policy), 0o600))
	}
	db, err := sqlite.Open(ctx, e.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e.db = db
	if e.keys, err = apikey.New(apikey.Options{Store: db, Log: e.log}); err != nil {
		t.Fatal(err)
	}
	if e.s, err = newSigner(ctx, e.cfg, db, e.log, nil, signerHooks{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.s.Close() })
	return e
}
