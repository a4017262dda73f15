package signer_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

// TestCloseEmptyLog: closing a signer that never recorded anything is not
// an error (there is no checkpoint to sign).
func TestCloseEmptyLog(t *testing.T) {
	db, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := signer.New(context.Background(), signer.Options{Store: db, KeyFile: filepath.Join(t.TempDir(), "k.pem"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() of an empty log = %v, want nil", err)
	}
}
