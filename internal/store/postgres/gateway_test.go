package postgres

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestGateway(t *testing.T) {
	storetest.Gateway(t, func(tb testing.TB) gateway.Store { return openTestDB(tb) })
}

// TestGatewayReplicas races three pools on one schema: Seq must follow
// commit order across replicas, which a sequence alone does not give.
func TestGatewayReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.GatewayReplicas(t, dbs[0], dbs[1], dbs[2])
}

// TestListenGatewayRevocations: a revocation committed through one pool
// reaches a listener on another (another replica) with its jti and exp,
// again when revoked again; resync runs when listening starts and for a
// malformed payload; a revocation that rolls back is never announced.
func TestListenGatewayRevocations(t *testing.T) {
	dbs := openReplicas(t, 2)
	a, b := dbs[0], dbs[1]
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	rec := gateway.TokenRecord{JTI: "3q1uXnXkQw2cL0m8Zk3f1A", IssuedAt: now, ExpiresAt: now.Add(time.Hour), Providers: []string{"openai"}}
	if err := a.RecordToken(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		got     []gateway.Revocation
		resyncs int
	)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.ListenGatewayRevocations(lctx,
			func(r gateway.Revocation) { mu.Lock(); got = append(got, r); mu.Unlock() },
			func() { mu.Lock(); resyncs++; mu.Unlock() }, nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenGatewayRevocations() = %v", err)
		}
	})
	count := func() (int, int) { mu.Lock(); defer mu.Unlock(); return len(got), resyncs }
	waitFor(t, "the listener to start (resync)", func() bool { _, r := count(); return r == 1 })

	for i := 1; i <= 2; i++ {
		if _, err := a.RevokeToken(ctx, rec.JTI, now); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("notification %d", i), func() bool { n, _ := count(); return n == i })
		mu.Lock()
		r := got[i-1]
		mu.Unlock()
		if r.JTI != rec.JTI || !r.ExpiresAt.Equal(rec.ExpiresAt) {
			t.Errorf("notified revocation %d = %+v, want jti %s exp %v", i, r, rec.JTI, rec.ExpiresAt)
		}
	}
	if _, err := a.RevokeToken(ctx, "never-minted", now); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("RevokeToken(unknown) = %v", err)
	}
	if _, err := a.pool.Exec(ctx, `SELECT pg_notify($1, 'garbage')`, GatewayRevocationChannel); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "resync after a malformed payload", func() bool { _, r := count(); return r == 2 })
	if n, _ := count(); n != 2 {
		t.Errorf("%d revocations notified, want 2 (nothing for an unknown jti)", n)
	}
}

func TestParseGatewayRevocation(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"1800001800 3q1uXnXkQw2cL0m8Zk3f1A", true},
		{"1800001800", false},
		{"1800001800 ", false},
		{"x 3q1u", false},
		{"1800001800 " + strings.Repeat("j", maxNotifiedJTI+1), false},
	} {
		r, ok := parseGatewayRevocation(tc.in)
		if ok != tc.ok || (ok && (r.JTI != "3q1uXnXkQw2cL0m8Zk3f1A" || r.ExpiresAt.Unix() != 1800001800)) {
			t.Errorf("parseGatewayRevocation(%q) = %+v, %v; want ok=%v", tc.in, r, ok, tc.ok)
		}
	}
}

// TestGatewayRevocationNotifiedToReplica: two gateways on one schema
// whose polls are an hour apart; a token revoked on A is refused on B,
// and B's stream of it cut, as soon as the notification arrives.
func TestGatewayRevocationNotifiedToReplica(t *testing.T) {
	ctx := context.Background()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			io.WriteString(w, "{}")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: x\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer up.Close()
	keys := t.TempDir()
	if err := os.WriteFile(filepath.Join(keys, "openai"), []byte("sk-real"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	dbs := openReplicas(t, 2)
	gws := make([]*gateway.Gateway, 2)
	for i, db := range dbs {
		g, err := gateway.New(ctx, gateway.Options{
			Store: db, SigningKey: key, KeysDir: keys, PollInterval: time.Hour,
			Providers: map[string]gateway.ProviderConfig{"openai": {BaseURL: up.URL}},
			Log:       slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		gws[i] = g
	}
	a, b := gws[0], gws[1]
	lctx, cancel := context.WithCancel(ctx)
	listened := make(chan struct{})
	go func() {
		defer close(listened)
		dbs[1].ListenGatewayRevocations(lctx, b.ApplyRevocation, b.PollNow, nil)
	}()
	defer func() { cancel(); <-listened }()

	m, err := a.Mint(ctx, gateway.Grant{Providers: []string{"openai"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.DataHandler())
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/openai/v1/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+m.Token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("B before the revocation = %d", resp.StatusCode)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); ended <- err }()
	if err := a.Revoke(ctx, m.JTI); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/openai/v1/chat/completions", strings.NewReader(`{}`))
		r.Header.Set("Authorization", "Bearer "+m.Token)
		b.DataHandler().ServeHTTP(rec, r)
		if rec.Code == http.StatusUnauthorized && rec.Body.String() == "gateway token revoked\n" {
			break
		}
		if rec.Code != http.StatusOK {
			t.Fatalf("B = %d %q, want 200 until it learns of the revocation, then 401 gateway token revoked", rec.Code, rec.Body.String())
		}
		if time.Now().After(deadline) {
			t.Fatal("B did not learn of the revocation within 10 s (its poll is an hour away)")
		}
		// Until the listener listens, announce again (revoking twice
		// notifies twice).
		if err := a.Revoke(ctx, m.JTI); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("B's stream of the revoked token not cut")
	}
}

// TestGatewayModelsMigration: a token recorded by a binary from before
// migration 6 (schema version 5, no models column) reads back with nil
// Models after the upgrade.
func TestGatewayModelsMigration(t *testing.T) {
	u := pgtest.Schema(t)
	ctx := context.Background()
	db, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	// Back to schema version 5 (undoing migrations 6 to 11), then the old
	// binary's INSERT. Its row reads back with no repos either.
	r := storetest.LegacyTokenRecord
	for _, q := range []string{
		`ALTER TABLE gateway_tokens DROP COLUMN repos`, // migration 11
		`ALTER TABLE gateway_tokens DROP COLUMN models`,
		`DROP TABLE signer_inbox`, // migration 7
		`DROP TABLE signer_arg_digests`,
		`DROP INDEX gateway_tokens_run`, // migration 8
		`DROP TABLE metering_budgets`,   // migration 9
		`DROP TABLE metering_reservations`,
		`DROP TABLE metering_usage`,
		`ALTER TABLE gateway_tokens DROP COLUMN budget_requests`, // migration 10
		`ALTER TABLE gateway_tokens DROP COLUMN budget_input_tokens`,
		`ALTER TABLE gateway_tokens DROP COLUMN budget_output_tokens`,
		`ALTER TABLE gateway_tokens DROP COLUMN run_budget_requests`,
		`ALTER TABLE gateway_tokens DROP COLUMN run_budget_input_tokens`,
		`ALTER TABLE gateway_tokens DROP COLUMN run_budget_output_tokens`,
		`UPDATE custody_schema SET version = 5`,
		fmt.Sprintf(`INSERT INTO gateway_tokens (jti, issued_at, expires_at, providers, run_id, tenant, agent) VALUES ('%s', %d, %d, '{openai}', '%s', '%s', '%s')`,
			r.JTI, r.IssuedAt.Unix(), r.ExpiresAt.Unix(), r.RunID, r.Tenant, r.Agent),
	} {
		if _, err := db.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	db, err = Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.GatewayUpgraded(t, db)
}
