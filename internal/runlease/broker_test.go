package runlease_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/gateway/gittest"
	"github.com/agentcustody/custody/internal/runlease"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

func TestGitEnv(t *testing.T) {
	if got := runlease.GitEnv("http://gw:8866", "", nil); got != nil {
		t.Errorf("GitEnv(none) = %v, want nil", got)
	}
	got := runlease.GitEnv("http://gw:8866/", "", []string{"github", "ghe"})
	helper := func(v string) string {
		return `!f() { test "$1" = get && printf 'username=x-access-token\npassword=%s\n' "$` + v + `"; }; f`
	}
	want := map[string]string{
		"GIT_CONFIG_COUNT": "5",
		"GIT_CONFIG_KEY_0": "credential.http://gw:8866/github/.helper", "GIT_CONFIG_VALUE_0": "",
		"GIT_CONFIG_KEY_1": "credential.http://gw:8866/github/.helper", "GIT_CONFIG_VALUE_1": helper("CUSTODY_GITHUB_TOKEN"),
		"GIT_CONFIG_KEY_2": "url.http://gw:8866/github/.insteadOf", "GIT_CONFIG_VALUE_2": "https://github.com/",
		"GIT_CONFIG_KEY_3": "credential.http://gw:8866/ghe/.helper", "GIT_CONFIG_VALUE_3": "",
		"GIT_CONFIG_KEY_4": "credential.http://gw:8866/ghe/.helper", "GIT_CONFIG_VALUE_4": helper("CUSTODY_GHE_TOKEN"),
	}
	if len(got) != len(want) {
		t.Errorf("GitEnv = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("GitEnv[%s] = %q, want %q", k, got[k], v)
		}
	}
	env, err := runlease.BrokerEnv([]runlease.Broker{{Provider: "acme-api"}, {Provider: "github", Git: true, Repos: []runlease.RepoGrant{{Repo: "o/r", Access: "read"}}}},
		"http://gw:8866", "", []string{"tok-acme", "tok-gh"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"CUSTODY_ACME_API_TOKEN": "tok-acme", "CUSTODY_ACME_API_URL": "http://gw:8866/acme-api",
		"CUSTODY_GITHUB_TOKEN": "tok-gh", "CUSTODY_GITHUB_URL": "http://gw:8866/github", "GIT_CONFIG_COUNT": "3",
	} {
		if env[k] != v {
			t.Errorf("BrokerEnv[%s] = %q, want %q", k, env[k], v)
		}
	}
	ca := runlease.GitEnv("https://gw:8866", "/etc/custody/ca.crt", []string{"ghe"})
	if ca["GIT_CONFIG_COUNT"] != "3" || ca["GIT_CONFIG_KEY_2"] != "http.https://gw:8866/ghe/.sslCAInfo" || ca["GIT_CONFIG_VALUE_2"] != "/etc/custody/ca.crt" {
		t.Errorf("GitEnv with a CA file = %v", ca)
	}
	if _, ok := env["GH_TOKEN"]; ok {
		t.Error("BrokerEnv sets GH_TOKEN")
	}
	for k, v := range env {
		if strings.Contains(v, "tok-") && !strings.HasSuffix(k, "_TOKEN") {
			t.Errorf("a token is in %s=%q", k, v)
		}
	}
}

func TestBrokersValidation(t *testing.T) {
	h := newHarness(t, shared)
	gh := runlease.Broker{Provider: "github", Git: true, Repos: []runlease.RepoGrant{{Repo: "octo/hello", Access: "read"}}}
	for name, tc := range map[string]struct {
		providers []string
		brokers   []runlease.Broker
	}{
		"nothing":           {nil, nil},
		"bad name":          {nil, []runlease.Broker{{Provider: "Bad Name"}}},
		"twice":             {nil, []runlease.Broker{gh, gh}},
		"model provider":    {[]string{"openai"}, []runlease.Broker{{Provider: "openai"}}},
		"repos without git": {nil, []runlease.Broker{{Provider: "acme", Repos: gh.Repos}}},
		"git without repos": {nil, []runlease.Broker{{Provider: "github", Git: true}}},
		"access neither":    {nil, []runlease.Broker{{Provider: "github", Git: true, Repos: []runlease.RepoGrant{{Repo: "o/r", Access: "admin"}}}}},
	} {
		o := h.options(t, "true")
		o.Providers, o.Brokers = tc.providers, tc.brokers
		if _, err := runlease.Run(context.Background(), o); err == nil {
			t.Errorf("%s: Run = nil error, want a validation error", name)
		}
	}
	if mints, _, _ := h.admin.state(); len(mints) != 0 {
		t.Errorf("%d mints for invalid options", len(mints))
	}
}

// TestBrokerTokens: a run with brokered providers mints one token per
// provider, each scoped alone (the github one to its repos), hands each
// only in its own variables, and revokes every one at exit; a revoke
// that fails is reported for its token while the others are revoked.
func TestBrokerTokens(t *testing.T) {
	h := newHarness(t, shared)
	o := h.options(t, "sh", "-c", `printf '%s|%s|%s|%s' "$ANTHROPIC_API_KEY" "$CUSTODY_ACME_TOKEN" "$CUSTODY_GITHUB_TOKEN" "$GIT_CONFIG_COUNT" | sha256sum`)
	o.Brokers = []runlease.Broker{
		{Provider: "acme"},
		{Provider: "github", Git: true, Repos: []runlease.RepoGrant{{Repo: "octo/hello", Access: "read"}, {Repo: "octo/site", Access: "write"}}},
	}
	code, err := runlease.Run(context.Background(), o)
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	mints, revokes, tokens := h.admin.state()
	if len(mints) != 3 || len(tokens) != 3 {
		t.Fatalf("mints = %v, want 3", mints)
	}
	if fmt.Sprint(mints[0]["providers"]) != "[anthropic]" || fmt.Sprint(mints[1]["providers"]) != "[acme]" ||
		fmt.Sprint(mints[2]["providers"]) != "[github]" || mints[1]["repos"] != nil ||
		fmt.Sprint(mints[2]["repos"]) != "[map[access:read repo:octo/hello] map[access:write repo:octo/site]]" || mints[2]["run_id"] != "run-test" {
		t.Errorf("mint bodies = %v", mints)
	}
	env := h.proc.startRequests()[0].GetConfig().GetEnvVars()
	byToken := map[string]string{}
	for k, v := range env {
		if _, ok := tokensByValue(tokens)[v]; ok {
			byToken[v] = k
		}
	}
	if len(byToken) != 3 || env["CUSTODY_ACME_URL"] != "http://gateway.test:8866/acme" || env["GIT_CONFIG_COUNT"] != "3" {
		t.Errorf("env_vars = %v", slices.Sorted(mapKeys(env)))
	}
	want := sha256hex(env["ANTHROPIC_API_KEY"] + "|" + env["CUSTODY_ACME_TOKEN"] + "|" + env["CUSTODY_GITHUB_TOKEN"] + "|3")
	if got := h.stdout.String(); !strings.HasPrefix(got, want) {
		t.Errorf("process saw %q, want %s", got, want)
	}
	if len(revokes) != 3 {
		t.Errorf("revokes = %v, want all 3", revokes)
	}
	for _, tok := range tokens {
		h.checkNoLeak(t, tok)
	}

	// A revoke failure of one token is reported; the others are revoked.
	h2 := newHarness(t, shared)
	h2.admin.revokeStatus = http.StatusNotFound
	o2 := h2.options(t, "true")
	o2.Brokers = []runlease.Broker{{Provider: "acme"}}
	_, err = runlease.Run(context.Background(), o2)
	var re *runlease.RevokeError
	if !errors.As(err, &re) || strings.Count(err.Error(), "REVOKE FAILED") != 2 {
		t.Errorf("Run with failing revokes = %v, want a RevokeError per token", err)
	}
}

func tokensByValue(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[v] = k
	}
	return out
}

// TestBrokerMintFailureRevokesMinted: when a brokered token cannot be
// minted, the tokens already minted are revoked and nothing starts.
func TestBrokerMintFailureRevokesMinted(t *testing.T) {
	h := newHarness(t, shared)
	o := h.options(t, "true")
	o.Brokers = []runlease.Broker{{Provider: "acme"}}
	var n int
	h.admin.mintHook = func() int {
		n++
		if n == 2 {
			return http.StatusBadRequest
		}
		return 0
	}
	if _, err := runlease.Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "acme") {
		t.Fatalf("Run = %v, want the acme mint failure", err)
	}
	_, revokes, tokens := h.admin.state()
	if len(tokens) != 1 || len(revokes) != 1 {
		t.Errorf("tokens %v, revokes %v; want the one minted token revoked", tokens, revokes)
	}
	if len(h.proc.startRequests()) != 0 {
		t.Error("the process started")
	}
}

// TestGitThroughRunlease: custody exec's path end to end with the real
// git, the real gateway and sandboxd: a process given only a github
// brokered token clones https://github.com/octo/hello (sent to the
// gateway by the environment's insteadOf), pushes to it with write
// access, cannot push to a read-only repository, and its token is
// revoked at exit. The gateway is served over TLS with its own CA.
func TestGitThroughRunlease(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git")
	}
	const real = "ghs_real-github-credential-runlease"
	gs := gittest.New(t, "x-access-token", real)
	hello := gs.CreateBare(t, "octo/hello", "hello\n")
	gs.CreateBare(t, "octo/docs", "docs\n")
	db, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	keys := t.TempDir()
	if err := os.WriteFile(filepath.Join(keys, "github"), []byte(real), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), gateway.Options{
		Store: db, KeysDir: keys, HMACSecret: []byte(strings.Repeat("k", 32)),
		Providers: map[string]gateway.ProviderConfig{"github": {BaseURL: "http://127.0.0.1:1", GitURL: gs.URL}},
		Log:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The data plane over TLS: git trusts its CA through the sandbox CA
	// file (http.<gateway>.sslCAInfo), not the system's roots.
	data, admin := httptest.NewTLSServer(g.DataHandler()), httptest.NewServer(g.AdminHandler())
	t.Cleanup(func() { data.Close(); admin.Close(); g.Close() })
	ac, err := runlease.NewAdminClient(runlease.AdminOptions{URL: admin.URL, Token: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, shared)
	o := h.options(t, "sh", "-c", `set -e
export HOME="$(mktemp -d)" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.invalid GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.invalid
unset GIT_SSL_CAINFO # as in a sandbox: this machine's environment sets it, and sandboxd passes it on
git config --global credential.helper store
cd "$HOME"
git clone -q https://github.com/octo/hello
cd hello
echo pushed > NEW && git add NEW && git commit -qm pushed
git push -q origin main
git clone -q https://github.com/octo/docs "$HOME/docs"
cd "$HOME/docs" && git commit -q --allow-empty -m nope
if git push -q origin main 2>"$HOME/err"; then echo "push to read-only succeeded"; exit 3; fi
cat "$HOME/err" >&2
test ! -e "$HOME/.git-credentials" || { echo "credentials stored"; exit 4; }
git -C "$HOME/hello" rev-parse HEAD`)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: data.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Admin, o.Providers, o.GatewayURL, o.SandboxCAFile = ac, nil, data.URL, caFile
	o.Brokers = []runlease.Broker{{Provider: "github", Git: true, Repos: []runlease.RepoGrant{{Repo: "octo/hello", Access: "write"}, {Repo: "octo/docs", Access: "read"}}}}
	o.KillGrace = 10 * time.Second
	code, err := runlease.Run(context.Background(), o)
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v\nstdout %s\nstderr %s", code, err, h.stdout.String(), h.stderr.String())
	}
	if got, want := gittest.Head(t, hello), strings.TrimSpace(h.stdout.String()); got != want {
		t.Errorf("bare main = %s, want the pushed %s", got, want)
	}
	if !strings.Contains(h.stderr.String(), "token not valid for writing to repository octo/docs") {
		t.Errorf("stderr = %q, want the gateway's refusal", h.stderr.String())
	}
	for _, s := range []string{h.stdout.String(), h.stderr.String()} {
		if strings.Contains(s, real) {
			t.Errorf("the process saw the real credential: %q", s)
		}
	}
	// Revoked at exit: the token the process had no longer works.
	env := h.proc.startRequests()[0].GetConfig().GetEnvVars()
	req, _ := http.NewRequest("GET", data.URL+"/github/octo/hello.git/info/refs?service=git-upload-pack", nil)
	req.Header.Set("Authorization", "Bearer "+env["CUSTODY_GITHUB_TOKEN"])
	resp, err := data.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the run's token after exit = %d, want 401 revoked", resp.StatusCode)
	}
}
