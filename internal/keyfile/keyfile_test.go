package keyfile

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestLoadOrCreateEd25519(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "key.pem")
	k1, err := LoadOrCreateEd25519(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	k2, err := LoadOrCreateEd25519(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("second LoadOrCreateEd25519() = a different key (%v)", err)
	}
}

func TestConcurrentCreateAgrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.pem")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := LoadOrCreateEd25519(path)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for i := range keys {
		if string(keys[i]) != string(keys[0]) {
			t.Fatal("concurrent callers got different keys")
		}
	}
}

func TestParseRefusesOtherFiles(t *testing.T) {
	for name, data := range map[string]string{
		"empty":     "",
		"not PEM":   "hello",
		"wrong PEM": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"bad DER":   "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
	} {
		if _, err := Parse([]byte(data)); err == nil {
			t.Errorf("Parse(%s) = nil error", name)
		}
	}
}
