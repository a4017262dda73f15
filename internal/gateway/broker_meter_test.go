package gateway_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/gateway/gittest"
	"github.com/agentcustody/custody/internal/metering"
)

// TestBrokeredRequestsMeteredAsRequests: with the meter on, a brokered
// request (here a 512 KiB git push) counts as one request and no tokens,
// so a token budget on input tokens does not refuse it.
func TestBrokeredRequestsMeteredAsRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git")
	}
	const real = "ghs_real-github-credential-metered"
	gs := gittest.New(t, "x-access-token", real)
	hello := gs.CreateBare(t, "octo/hello", "hello\n")
	ctx := context.Background()
	st := openSQLite(t, t.TempDir())
	quiet := slog.New(slog.DiscardHandler)
	m, err := metering.New(metering.Options{Store: st, FlushInterval: 20 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	keys := t.TempDir()
	if err := os.WriteFile(filepath.Join(keys, "github"), []byte(real), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(ctx, gateway.Options{
		Store: st, KeysDir: keys, SigningKey: newKey(t), Meter: m, Log: quiet, PollInterval: 50 * time.Millisecond,
		Providers: map[string]gateway.ProviderConfig{"github": {BaseURL: "http://127.0.0.1:1", GitURL: gs.URL}},
	})
	if err != nil {
		t.Fatal(err)
	}
	data := httptest.NewServer(g.DataHandler())
	t.Cleanup(func() { data.Close(); g.Close(); m.Close(ctx) })
	tok, err := g.Mint(ctx, gateway.Grant{Providers: []string{"github"}, Tenant: "agents",
		Repos:  []gateway.RepoGrant{{Repo: "octo/hello", Access: gateway.AccessWrite}},
		Budget: metering.Usage{Requests: 100, InputTokens: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	env := append(gittest.Env(t), "TOK="+tok.Token, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper",
		`GIT_CONFIG_VALUE_0=!f() { test "$1" = get && printf 'username=x\npassword=%s\n' "$TOK"; }; f`)
	work := t.TempDir()
	gittest.Must(t, work, env, "clone", "--quiet", data.URL+"/github/octo/hello.git", "c")
	dir := filepath.Join(work, "c")
	big := make([]byte, 512<<10) // under http.postBuffer: sent with a Content-Length
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(dir, "BIG"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Must(t, dir, env, "add", "BIG")
	gittest.Must(t, dir, env, "commit", "--quiet", "-m", "big")
	if out, err := gittest.Run(dir, env, "push", "origin", "main"); err != nil {
		t.Fatalf("push under an input-token budget: %v\n%s", err, out)
	}
	if got, want := gittest.Head(t, hello), strings.TrimSpace(gittest.Must(t, dir, env, "rev-parse", "HEAD")); got != want {
		t.Errorf("bare main = %s, want %s", got, want)
	}
}
