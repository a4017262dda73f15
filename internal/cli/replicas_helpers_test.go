package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// pgReplicas runs `custody serve` replicas on one fresh PostgreSQL schema,
// in process, with a static token for the agent local/dev and an admin
// token.
type pgReplicas struct {
	t              *testing.T
	dir, db, token string
}

// replica is one running replica's listeners (host:port).
type replica struct{ api, admin, metrics string }

func newPGReplicas(t *testing.T) *pgReplicas {
	p := &pgReplicas{t: t, dir: t.TempDir(), db: pgtest.Schema(t), token: "local-dev-token-0123456789"}
	sum := sha256.Sum256([]byte(p.token))
	must(t, os.WriteFile(filepath.Join(p.dir, "tokens.yaml"), []byte("tokens:\n  - sha256: "+hex.EncodeToString(sum[:])+
		"\n    tenant: local\n    agent: dev\n    session: laptop\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(p.dir, "admin"), []byte(strings.Repeat("A", 40)), 0o600))
	return p
}

// start runs replica name with the shared keys in keysDir (made by
// `custody keys init` if missing) until stop or the test's end.
func (p *pgReplicas) start(name, keysDir string) (r replica, stop func()) {
	return p.startWith(name, keysDir, p.db)
}

// startWith is start with the database at db (the test's schema, perhaps
// through a proxy) and extra serve flags, which override the defaults.
func (p *pgReplicas) startWith(name, keysDir, db string, extra ...string) (r replica, stop func()) {
	t := p.t
	if code, out, errs := runCLI(t, context.Background(), envMap(nil), "", "keys", "init", "--dir", keysDir); code != 0 {
		t.Fatalf("keys init = %d %s %s", code, out, errs)
	}
	r = replica{freeAddr(t), freeAddr(t), freeAddr(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		args := append([]string{"serve", "--kubernetes-auth=false",
			"--static-tokens-file=" + filepath.Join(p.dir, "tokens.yaml"), "--listen=" + r.api, "--admin-listen=" + r.admin,
			"--admin-token-file=" + filepath.Join(p.dir, "admin"), "--gateway-listen=", "--metrics-listen=" + r.metrics,
			"--signer-key-file=" + filepath.Join(keysDir, signerKeyFile),
			"--data-dir=" + filepath.Join(p.dir, name), "--log-level=error", "--plaintext=all"}, extra...)
		code, _, stderr := runCLI(t, ctx, envMap(map[string]string{"CUSTODY_DATABASE_URL": db}), "", args...)
		if code != 0 && ctx.Err() == nil {
			t.Errorf("serve %s exit %d: %s", name, code, stderr)
		}
	}()
	waitHTTP(t, "http://"+r.api+"/healthz")
	var once bool
	stop = func() {
		if !once {
			once = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return r, stop
}

// do sends one request and returns the status, body and headers.
func (p *pgReplicas) do(method, url, bearer, body string) (int, string, http.Header) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(p.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header
}

// key exchanges the static token on r for a key.
func (p *pgReplicas) key(r replica) string {
	st, body, _ := p.do("POST", "http://"+r.api+"/v1/auth/static", "", `{"token":"`+p.token+`"}`)
	var k struct{ Key string }
	if st != 200 || json.Unmarshal([]byte(body), &k) != nil {
		p.t.Fatalf("static exchange = %d %s", st, body)
	}
	return k.Key
}
