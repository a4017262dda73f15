package sdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMCPProxyNodeClient runs node/mcpproxy.test.mjs, the official npm
// MCP client (@modelcontextprotocol/sdk), against a `custody serve
// --mcp-upstreams` of its own whose upstream is node/mcp-upstream.mjs
// (the npm SDK's server): the client lists tools (one hidden by policy)
// and makes an allowed and a denied call. The upstream must then have
// run only the allowed call and seen only its own credential.
func TestMCPProxyNodeClient(t *testing.T) {
	if _, err := os.Stat(filepath.Join("node", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("npm packages not installed (run `npm ci` in test/sdk/node): %v", err)
	}
	dir := t.TempDir()
	addr, err := freeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	upAddr, apiAddr, metricsAddr := addr[0], addr[1], addr[2]
	secret := "upstream-" + randHex(16)

	upstream := exec.Command("node", "mcp-upstream.mjs")
	upstream.Dir = "node"
	upstream.Env = append(os.Environ(), "UPSTREAM_ADDR="+upAddr, "UPSTREAM_SECRET="+secret)
	var upOut bytes.Buffer
	upstream.Stdout, upstream.Stderr = &upOut, &upOut
	upstream.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := upstream.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = upstream.Process.Kill(); _ = upstream.Wait(); t.Logf("upstream:\n%s", upOut.String()) }()
	upLog := func() (log struct{ Calls, Auths []string }) {
		resp, err := http.Get("http://" + upAddr + "/_log")
		if err != nil {
			return log
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&log)
		return log
	}
	waitFor(t, "upstream", func() bool { _, err := http.Get("http://" + upAddr + "/_log"); return err == nil })

	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := randHex(32)
	sum := sha256.Sum256([]byte(token))
	static := write("tokens.yaml", "tokens:\n  - sha256: "+hex.EncodeToString(sum[:])+"\n    tenant: sdk\n    agent: npm\n    session: node\n")
	write("policies/sdk.yaml", `rules:
  - id: SDK-MCP
    effect: allow
    tool: "mcp__npm__*"
  - id: SDK-NOFORBID
    effect: deny
    tool: "mcp__npm__forbidden_tool"
  - id: SDK-SECRET
    effect: deny
    tool: "mcp__npm__echo"
    when: 'args.text == "secret"'
`)
	cred := write("upstream-credential", secret+"\n")
	upstreams := write("upstreams.yaml", fmt.Sprintf("upstreams:\n  - name: npm\n    url: http://%s/mcp\n    tenants: [sdk]\n    credential:\n      file: %s\n", upAddr, cred))

	logPath := filepath.Join(dir, "custody.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(custodyBin, "serve",
		"--listen="+apiAddr, "--metrics-listen="+metricsAddr, "--gateway-listen=",
		"--data-dir="+filepath.Join(dir, "data"), "--kubernetes-auth=false", "--static-tokens-file="+static,
		"--policy-dir="+filepath.Join(dir, "policies"), "--mcp-upstreams="+upstreams, "--log-level=debug", "--plaintext=all")
	srv.Stdout, srv.Stderr = logf, logf
	srv.Env = append(os.Environ(), "KUBECONFIG=")
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = srv.Process.Kill()
			<-done
		}
		logf.Close()
	}()
	waitFor(t, "custody", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	resp, err := http.Post("http://"+apiAddr+"/v1/auth/static", "application/json", strings.NewReader(`{"token":"`+token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var minted struct {
		Key string `json:"key"`
	}
	err = json.NewDecoder(resp.Body).Decode(&minted)
	resp.Body.Close()
	if err != nil || minted.Key == "" {
		t.Fatalf("exchange: %d %v", resp.StatusCode, err)
	}

	cmd := exec.Command("node", "--test", "--test-concurrency=1", "mcpproxy.test.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "CUSTODY_URL=http://"+apiAddr, "CUSTODY_KEY="+minted.Key)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}

	log := upLog()
	if !slices.Equal(log.Calls, []string{"echo"}) {
		t.Errorf("upstream ran %v, want only the allowed echo", log.Calls)
	}
	if len(log.Auths) == 0 {
		t.Error("the upstream saw no request")
	}
	for _, a := range log.Auths {
		if a != "Bearer "+secret {
			t.Errorf("upstream saw Authorization %.16q..., want only its credential", a)
		}
	}
	logged, _ := os.ReadFile(logPath)
	if bytes.Contains(logged, []byte(secret)) || bytes.Contains(logged, []byte(minted.Key)) {
		t.Error("custody's log carries the upstream credential or the custody key")
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
