package staticauth

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAttack10ReplacedKeepingModTime: a token file rewritten with the
// same size and modification time (a token's entry replaced by another's,
// as cp -p, rsync -a, tar or a Nix store path with mtime 1 leave it;
// in place or by swapping a symlink to a new file) was not read again, so
// the removed token was still exchanged for keys until a restart.
func TestAttack10ReplacedKeepingModTime(t *testing.T) {
	mtime := time.Unix(1, 0)
	for _, swap := range []bool{false, true} {
		dir := t.TempDir()
		a1 := filepath.Join(dir, "a1.yaml")
		if err := os.WriteFile(a1, []byte("tokens:\n"+entry("tok-old", "dev")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(a1, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		path := a1
		if swap {
			path = filepath.Join(dir, "tokens.yaml")
			if err := os.Symlink(a1, path); err != nil {
				t.Fatal(err)
			}
		}
		a, err := Load(path, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := a.Authenticate(ctx, "tok-old"); err != nil {
			t.Fatalf("Authenticate(tok-old) = %v", err)
		}
		next := []byte("tokens:\n" + entry("tok-new", "dev"))
		if swap {
			a2 := filepath.Join(dir, "a2.yaml")
			if err := os.WriteFile(a2, next, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(a2, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(dir, "tmp-link")
			if err := os.Symlink(a2, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := os.WriteFile(path, next, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.Authenticate(ctx, "tok-old"); !errors.Is(err, ErrUnknownToken) {
			t.Errorf("swap %v: Authenticate(tok-old) after its entry was replaced = %v, want ErrUnknownToken", swap, err)
		}
		if _, err := a.Authenticate(ctx, "tok-new"); err != nil {
			t.Errorf("swap %v: Authenticate(tok-new) = %v", swap, err)
		}
	}
}
