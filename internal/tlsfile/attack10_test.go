package tlsfile_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/tlsfile"
)

// TestAttack10KeyFileModes: a serving key others could read (0644) or
// group or others could write was loaded, at start and on reload; now New
// refuses it with ErrKeyPermissions and a reload to it keeps the pair in
// service, while 0600 and 0440 (deploy's Secret defaultMode) load.
func TestAttack10KeyFileModes(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o440, true}, {0o400, true}, {0o644, false}, {0o604, false}, {0o620, false}, {0o666, false}} {
		e := newEnv(t, false)
		if err := os.Chmod(e.files.Key, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := tlsfile.New(tlsfile.Options{CertFile: e.files.Cert, KeyFile: e.files.Key, Interval: time.Hour})
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, tlsfile.ErrKeyPermissions)) {
			t.Errorf("New(key mode %v) = %v, want ok %v", tc.mode, err, tc.ok)
		}

		// A rotation to a pair whose key has the mode.
		if err := os.Chmod(e.files.Key, 0o600); err != nil {
			t.Fatal(err)
		}
		before := e.r.Leaf()
		leaf := e.rotate(t)
		if err := os.Chmod(e.files.Key, tc.mode); err != nil {
			t.Fatal(err)
		}
		changed, err := e.r.Reload()
		switch {
		case tc.ok && (!changed || err != nil || !e.r.Leaf().Equal(leaf)):
			t.Errorf("Reload(key mode %v) = %v, %v; want the new pair", tc.mode, changed, err)
		case !tc.ok && (changed || !errors.Is(err, tlsfile.ErrKeyPermissions) || !e.r.Leaf().Equal(before)):
			t.Errorf("Reload(key mode %v) = %v, %v; want ErrKeyPermissions and the old pair kept", tc.mode, changed, err)
		}
	}
}
