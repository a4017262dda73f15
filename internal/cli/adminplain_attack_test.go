package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/tlsfile/tlsfiletest"
)

// TestAttackAdminTokenInClearWithCAFile: the Go client refuses
// CUSTODY_CA_FILE with a CUSTODY_URL that is not https ("a CA file says
// TLS was meant: the token must not go in clear"). The operator commands
// that carry the far more powerful admin token (export, trust; exec
// through runlease) do not: with --ca-file or $CUSTODY_CA_FILE set and
// an http:// --admin (a typo, or the http://127.0.0.1:8867 default when
// --admin is forgotten on another host's port-forward), the bearer token
// is sent in clear before anything learns whether the listener speaks
// TLS. Here a plaintext listener receives the admin token although a CA
// file is configured.
func TestAttackAdminTokenInClearWithCAFile(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsfiletest.NewCA("custody test CA")
	must(t, err)
	caFile := filepath.Join(dir, "ca.pem")
	must(t, os.WriteFile(caFile, ca.PEM, 0o600))
	admin := strings.Repeat("T", 40)
	tokFile := filepath.Join(dir, "admin-token")
	must(t, os.WriteFile(tokFile, []byte(admin), 0o600))
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer srv.Close()

	for name, env := range map[string]map[string]string{
		"--ca-file":        nil,
		"$CUSTODY_CA_FILE": {"CUSTODY_CA_FILE": caFile},
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"trust", "--admin", srv.URL, "--admin-token-file", tokFile, "-o", "-"}
			if env == nil {
				args = append(args, "--ca-file", caFile)
			}
			code, _, stderr := runCLI(t, context.Background(), envMap(env), "", args...)
			select {
			case h := <-got:
				if strings.Contains(h, admin) {
					t.Fatalf("custody trust with a CA file sent the admin token in clear to %s (exit %d: %s)", srv.URL, code, strings.TrimSpace(stderr))
				}
			default:
			}
		})
	}
	t.Run("exec", func(t *testing.T) {
		code, _, stderr := runCLI(t, context.Background(), envMap(map[string]string{"CUSTODY_ADMIN_TOKEN": admin}), "",
			"exec", "--admin", srv.URL, "--ca-file", caFile, "--sandboxd", "127.0.0.1:1", "--provider", "anthropic",
			"--gateway-url", "https://gw.example:8866", "--", "true")
		select {
		case h := <-got:
			if strings.Contains(h, admin) {
				t.Fatalf("custody exec with --ca-file sent the admin token in clear to %s (exit %d: %s)", srv.URL, code, strings.TrimSpace(stderr))
			}
		default:
		}
	})
}
