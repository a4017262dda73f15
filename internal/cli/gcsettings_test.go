package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestGCSettings(t *testing.T) {
	dir := t.TempDir()
	limited := filepath.Join(dir, "limited")
	os.WriteFile(limited, []byte("1000000000\n"), 0o600)
	unlimited := filepath.Join(dir, "unlimited")
	os.WriteFile(unlimited, []byte("max\n"), 0o600)
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		name    string
		env     map[string]string
		memMax  string
		percent int
		limit   int64
	}{
		{"container with a limit", nil, limited, serveGCPercent, 900000000},
		{"no limit", nil, unlimited, serveGCPercent, 0},
		{"no cgroup file", nil, filepath.Join(dir, "none"), serveGCPercent, 0},
		{"operator's GOGC wins", map[string]string{"GOGC": "100"}, limited, 0, 900000000},
		{"operator's GOMEMLIMIT wins", map[string]string{"GOMEMLIMIT": "512MiB"}, limited, serveGCPercent, 0},
	} {
		p, l := gcSettings(env(c.env), c.memMax)
		if p != c.percent || l != c.limit {
			t.Errorf("%s: gcSettings = %d, %d; want %d, %d", c.name, p, l, c.percent, c.limit)
		}
	}
}
