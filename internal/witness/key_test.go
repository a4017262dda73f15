package witness_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentcustody/custody/internal/witness"
)

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "witness.pem")
	k1, err := witness.LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v, want 0600", st.Mode().Perm(), err)
	}
	k2, err := witness.LoadOrCreateKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("LoadOrCreateKey(again) = %v, want the same key", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.pem")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := witness.LoadOrCreateKey(bad); err == nil {
		t.Error("LoadOrCreateKey(garbage) = nil, want an error")
	}
}
