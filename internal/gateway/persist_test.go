package gateway_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

// TestRevocationSurvivesRestart revokes a token, closes the gateway and
// its database, and checks a gateway on the reopened database refuses
// the token.
func TestRevocationSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keysDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(keysDir, "openai"), []byte("sk-real"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	_, key, _ := ed25519.GenerateKey(rand.Reader)

	start := func() (*gateway.Gateway, *sqlite.DB) {
		db, err := sqlite.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		g, err := gateway.New(ctx, gateway.Options{
			Store: db, SigningKey: key, KeysDir: keysDir, Log: slog.New(slog.DiscardHandler),
			Providers: map[string]gateway.ProviderConfig{"openai": {BaseURL: up.URL}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return g, db
	}
	call := func(g *gateway.Gateway, tok string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/openai/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		g.DataHandler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}

	g, db := start()
	revoked, err := g.Mint(ctx, gateway.Grant{Providers: []string{"openai"}, TTL: time.Hour, RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	live, err := g.Mint(ctx, gateway.Grant{Providers: []string{"openai"}, TTL: time.Hour, RunID: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := call(g, revoked.Token); code != 200 {
		t.Fatalf("before revoke = %d %q", code, body)
	}
	if err := g.Revoke(ctx, revoked.JTI); err != nil {
		t.Fatal(err)
	}
	g.Close()
	db.Close()

	g, db = start()
	defer db.Close()
	defer g.Close()
	if code, body := call(g, revoked.Token); code != 401 || body != "gateway token revoked\n" {
		t.Errorf("revoked token after restart = %d %q, want 401 gateway token revoked", code, body)
	}
	if code, body := call(g, live.Token); code != 200 {
		t.Errorf("live token after restart = %d %q, want 200", code, body)
	}
	if err := g.Revoke(ctx, revoked.JTI); err != nil {
		t.Errorf("revoking again after restart = %v, want nil", err)
	}
}
