package keyfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestAttack10KeyFileModes: a signing key others can read (0644, the
// Kubernetes Secret default) or that group or others can write was
// loaded and used; now it is refused with ErrPermissions, through a
// symlink too (a Secret volume's ..data link), while 0600, 0400 and 0440
// (a Secret with defaultMode 0440 and fsGroup) load.
func TestAttack10KeyFileModes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.pem")
	want, err := LoadOrCreateEd25519(src)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o440, true}, {0o640, true},
		{0o644, false}, {0o604, false}, {0o620, false}, {0o602, false}, {0o660, false}, {0o666, false},
	} {
		for _, link := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "key.pem")
			if err := os.WriteFile(path, pem, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			if link {
				l := filepath.Join(filepath.Dir(path), "link.pem")
				if err := os.Symlink(path, l); err != nil {
					t.Fatal(err)
				}
				path = l
			}
			got, err := LoadOrCreateEd25519(path)
			switch {
			case tc.ok && (err != nil || !got.Equal(want)):
				t.Errorf("LoadOrCreateEd25519(mode %v, link %v) = %v; want the key", tc.mode, link, err)
			case !tc.ok && !errors.Is(err, ErrPermissions):
				t.Errorf("LoadOrCreateEd25519(mode %v, link %v) = %v; want ErrPermissions", tc.mode, link, err)
			}
		}
	}
}
