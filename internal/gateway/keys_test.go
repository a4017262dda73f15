package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestProviderKeyRotation(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"anthropic"}}).Token
	send := func() (int, string) {
		code, _, _ := e.do(t, "POST", "/anthropic/v1/messages", bearer(tok), "{}")
		if code != 200 {
			return code, ""
		}
		return code, e.up["anthropic"].last(t).Header.Get("X-Api-Key")
	}
	if _, k := send(); k != realKeys["anthropic"] {
		t.Fatalf("upstream key = %q, want the first key", k)
	}
	e.writeKey(t, "anthropic", "  sk-ant-rotated-key  \n")
	eventually(t, "the rotated key", func() bool { _, k := send(); return k == "sk-ant-rotated-key" })

	// Kubernetes Secret volumes swap a ..data symlink.
	secret := t.TempDir()
	for i, k := range []string{"sk-ant-v1", "sk-ant-v2"} {
		ts := filepath.Join(secret, fmt.Sprintf("..2026_%d", i))
		os.Mkdir(ts, 0o700)
		os.WriteFile(filepath.Join(ts, "anthropic"), []byte(k), 0o600)
	}
	os.Symlink("..2026_0", filepath.Join(secret, "..data"))
	os.Symlink("..data/anthropic", filepath.Join(secret, "anthropic"))
	k := newEnv(t, func(o *Options) { o.KeysDir = secret })
	tok2 := k.mint(t, Grant{Providers: []string{"anthropic"}}).Token
	k.do(t, "POST", "/anthropic/v1/messages", bearer(tok2), "{}")
	if got := k.up["anthropic"].last(t).Header.Get("X-Api-Key"); got != "sk-ant-v1" {
		t.Fatalf("symlinked key = %q, want sk-ant-v1", got)
	}
	os.Symlink("..2026_1", filepath.Join(secret, "..data_tmp"))
	os.Rename(filepath.Join(secret, "..data_tmp"), filepath.Join(secret, "..data"))
	eventually(t, "the swapped Secret key", func() bool {
		k.do(t, "POST", "/anthropic/v1/messages", bearer(tok2), "{}")
		return k.up["anthropic"].last(t).Header.Get("X-Api-Key") == "sk-ant-v2"
	})

	// Removing the file removes the key.
	os.Remove(filepath.Join(e.keysDir, "anthropic"))
	eventually(t, "502 after the key file is removed", func() bool { c, _ := send(); return c == 502 })
	// A key file with a newline inside is unusable, not injected.
	e.writeKey(t, "anthropic", "sk-ant\nX-Evil: 1")
	time.Sleep(100 * time.Millisecond)
	if c, _ := send(); c != 502 {
		t.Errorf("key with an inner newline: status %d, want 502", c)
	}
}
