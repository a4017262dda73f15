package staticauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func hash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func entry(tok, agent string) string {
	return "  - sha256: " + hash(tok) + "\n    tenant: local\n    agent: " + agent + "\n    session: laptop\n"
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"unknown field", "tokens:\n  - sha256: " + hash("a") + "\n    tenant: t\n    agent: a\n    session: s\n    role: admin\n", "unknown field"},
		{"short hash", "tokens:\n  - sha256: abc\n    tenant: t\n    agent: a\n    session: s\n", "64 hex"},
		{"not hex", "tokens:\n  - sha256: " + strings.Repeat("z", 64) + "\n    tenant: t\n    agent: a\n    session: s\n", "sha256"},
		{"bad tenant", "tokens:\n  - sha256: " + hash("a") + "\n    tenant: Bad_Name\n    agent: a\n    session: s\n", "tenant"},
		{"empty agent", "tokens:\n  - sha256: " + hash("a") + "\n    tenant: t\n    agent: \"\"\n    session: s\n", "agent"},
		{"duplicate", "tokens:\n" + entry("a", "x") + entry("a", "y"), "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestAuthenticateAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("tokens:\n"+entry("tok-1", "dev")), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := a.Authenticate(ctx, "tok-1")
	if err != nil || id.Tenant != "local" || id.Agent != "dev" || id.Session != "laptop" || id.Method != "static" {
		t.Fatalf("Authenticate(tok-1) = %+v, %v", id, err)
	}
	if _, err := a.Authenticate(ctx, "tok-2"); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("Authenticate(tok-2) = %v, want ErrUnknownToken", err)
	}
	// Replace the file: tok-1 removed, tok-2 added.
	later := time.Now().Add(2 * time.Second)
	if err := os.WriteFile(path, []byte("tokens:\n"+entry("tok-2", "ci")), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, later, later)
	if _, err := a.Authenticate(ctx, "tok-1"); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("removed token still accepted: %v", err)
	}
	if id, err := a.Authenticate(ctx, "tok-2"); err != nil || id.Agent != "ci" {
		t.Errorf("Authenticate(tok-2) after reload = %+v, %v", id, err)
	}
	// A broken file keeps the last good entries.
	os.WriteFile(path, []byte("tokens: [oops"), 0o600)
	later = later.Add(2 * time.Second)
	os.Chtimes(path, later, later)
	if _, err := a.Authenticate(ctx, "tok-2"); err != nil {
		t.Errorf("Authenticate after a broken rewrite = %v, want the last good entries", err)
	}
	// Deleting the file accepts nothing; restoring it accepts again.
	os.Remove(path)
	if _, err := a.Authenticate(ctx, "tok-2"); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("Authenticate after the file was deleted = %v, want ErrUnknownToken", err)
	}
	os.WriteFile(path, []byte("tokens:\n"+entry("tok-2", "ci")), 0o600)
	if _, err := a.Authenticate(ctx, "tok-2"); err != nil {
		t.Errorf("Authenticate after the file came back = %v", err)
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope"), nil); err == nil {
		t.Fatal("Load(missing file) = nil error")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("tokens:\n" + entry("a", "b")))
	f.Add([]byte("{}"))
	f.Add([]byte("tokens: [{sha256: 1}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		for _, id := range m {
			if id.Tenant == "" || id.Agent == "" || id.Session == "" {
				t.Fatalf("Parse accepted an empty identity field: %+v", id)
			}
		}
	})
}
