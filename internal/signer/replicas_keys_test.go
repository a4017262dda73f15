package signer_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
)

// TestReplicaRefusesAKeyThatDidNotSignTheLog: a replica whose key file is
// missing (a typo, a Secret not mounted) or holds another key must not
// take over a shared log and sign it with a key no trust.json lists.
// Shared: a missing file is an error, never a new key; shared or not, a
// key that did not sign the stored log is refused at start.
func TestReplicaRefusesAKeyThatDidNotSignTheLog(t *testing.T) {
	dbs := openPG(t, 2)
	dirA, dirB := replicaDir(t), replicaDir(t)
	ctx := context.Background()
	wa := lease(t, dbs[0])
	a := startReplica(t, dirA, wa.Store())
	info, err := a.s.Register(ctx, identity())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.decide(t, info.Run, "a1"); err != nil {
		t.Fatal(err)
	}
	a.close()
	wa.Release()

	wb := lease(t, dbs[1])
	keyB := filepath.Join(dirB, "signer.key")
	open := func(shared bool) error {
		s, err := signer.New(ctx, signer.Options{Store: wb.Store(), KeyFile: keyB, PolicyDir: filepath.Join(dirB, "policies"),
			Shared: shared, Log: slog.New(slog.DiscardHandler)})
		if err == nil {
			s.Close()
		}
		return err
	}
	if err := open(true); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("shared, key file missing: %v, want a refusal naming the missing file", err)
	}
	if _, err := os.Stat(keyB); err == nil {
		t.Fatal("a shared signer created a key file")
	}
	// Not shared: a fresh key is made, but it did not sign this log.
	if err := open(false); err == nil || !strings.Contains(err.Error(), "did not sign") {
		t.Fatalf("another key (made fresh): %v, want a refusal", err)
	}
	if err := open(true); err == nil || !strings.Contains(err.Error(), "did not sign") {
		t.Fatalf("shared, another key: %v, want a refusal", err)
	}
	// The log's own key works.
	raw, err := os.ReadFile(filepath.Join(dirA, "signer.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyB, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := open(true); err != nil {
		t.Fatalf("shared, the log's key: %v", err)
	}
}

// TestSharedSignerRefusesRotation: a rotated key would exist only on the
// replica that made it, stranding every other replica; a shared signer
// refuses to rotate (409 rotation_refused) and writes no key file.
func TestSharedSignerRefusesRotation(t *testing.T) {
	dbs := openPG(t, 1)
	dir := replicaDir(t)
	ctx := context.Background()
	w := lease(t, dbs[0])
	key := filepath.Join(dir, "signer.key")
	first, err := signer.New(ctx, signer.Options{Store: w.Store(), KeyFile: key, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	s, err := signer.New(ctx, signer.Options{Store: w.Store(), KeyFile: key, Shared: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.RotateKey(ctx); !errors.Is(err, signer.ErrRotationRefused) || signer.ErrorCode(err) != "rotation_refused" || signer.HTTPStatusFor(err) != 409 {
		t.Fatalf("RotateKey on a shared signer = %v, want ErrRotationRefused (409 rotation_refused)", err)
	}
	matches, _ := filepath.Glob(key + ".*")
	if len(matches) != 0 {
		t.Fatalf("a refused rotation left key files %v", matches)
	}
}
