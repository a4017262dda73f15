package sdk

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// providers are the gateway providers every test configures, all pointed
// at the stand-in. Each also has a twin "nokey-<p>" of the same kind that
// has no key file, so the gateway refuses it with a fixed 502.
var providers = []string{"openai", "anthropic", "gemini"}

// realKeys are the provider keys custody holds, made fresh per test run.
var realKeys = map[string]string{}

// gw is the custody under test, shared by every test in the package.
var gw *custody

// up is the provider stand-in behind it.
var up *standIn

// custodyBin is the custody binary built for the tests.
var custodyBin string

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdk tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "custody-sdk-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	for _, p := range providers {
		realKeys[p] = "sk-real-" + p + "-" + randHex(16)
	}
	up = newStandIn(realKeys)
	defer up.Close()
	bin, err := buildCustody(dir)
	if err != nil {
		return 0, err
	}
	custodyBin = bin
	gw, err = startCustody(dir, bin)
	if err != nil {
		return 0, err
	}
	defer gw.stop()
	return m.Run(), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// buildCustody builds ../../cmd/custody into dir.
func buildCustody(dir string) (string, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "custody")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/custody")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/custody: %w\n%s", err, out)
	}
	return bin, nil
}

// custody is a running `custody serve` with only the gateway and the
// admin listener in use.
type custody struct {
	gatewayURL, adminURL, adminToken, log string

	cmd  *exec.Cmd
	done chan struct{}
}

func startCustody(dir, bin string) (*custody, error) {
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		return nil, err
	}
	for p, k := range realKeys {
		if err := os.WriteFile(filepath.Join(keys, p), []byte(k+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	addr, err := freeAddrs(4)
	if err != nil {
		return nil, err
	}
	c := &custody{
		gatewayURL: "http://" + addr[0],
		adminURL:   "http://" + addr[1],
		adminToken: randHex(32),
		log:        filepath.Join(dir, "custody.log"),
		done:       make(chan struct{}),
	}
	tokFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokFile, []byte(c.adminToken), 0o600); err != nil {
		return nil, err
	}
	// Only the gateway is under test; custody needs one auth method, so
	// give it a static one whose only token nobody holds.
	static := filepath.Join(dir, "tokens.yaml")
	entry := "tokens:\n  - sha256: " + randHex(32) + "\n    tenant: sdk\n    agent: none\n    session: none\n"
	if err := os.WriteFile(static, []byte(entry), 0o600); err != nil {
		return nil, err
	}
	args := []string{"serve",
		"--gateway-listen=" + addr[0], "--admin-listen=" + addr[1],
		"--listen=" + addr[2], "--metrics-listen=" + addr[3],
		"--admin-token-file=" + tokFile, "--data-dir=" + filepath.Join(dir, "data"),
		"--kubernetes-auth=false", "--static-tokens-file=" + static, "--signer=false",
		"--gateway-keys-dir=" + keys,
		// The provider SDKs' behaviour through the gateway is under test
		// here, on loopback; TLS is tested in internal/cli and test/e2e.
		"--plaintext=all",
	}
	for _, p := range providers {
		args = append(args, "--gateway-provider="+p+"="+up.URL, "--gateway-provider=nokey-"+p+"="+p+":"+up.URL)
	}
	logf, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.Env = append(os.Environ(), "KUBECONFIG=")
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { _ = c.cmd.Wait(); logf.Close(); close(c.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.done:
			b, _ := os.ReadFile(c.log)
			return nil, fmt.Errorf("custody exited:\n%s", b)
		default:
		}
		if resp, err := http.Get("http://" + addr[3] + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			b, _ := os.ReadFile(c.log)
			return nil, fmt.Errorf("custody not ready after 30s:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddrs returns n loopback addresses whose ports were free a moment ago.
func freeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// stop sends SIGTERM and waits (SIGKILL after 10 s).
func (c *custody) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// minted is a gateway token from the admin listener.
type minted struct {
	Token string `json:"token"`
	JTI   string `json:"jti"`
}

// mint asks the admin listener for a gateway token for providers.
func mint(t testing.TB, providers ...string) minted {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"providers": providers, "ttl_seconds": 600})
	var m minted
	admin(t, "/v1/gateway/tokens", body, http.StatusCreated, &m)
	if m.Token == "" || m.JTI == "" {
		t.Fatalf("mint %v: empty token or jti", providers)
	}
	return m
}

// revoke revokes a gateway token by jti on the admin listener.
func revoke(t testing.TB, jti string) {
	t.Helper()
	admin(t, "/v1/gateway/tokens/"+jti+"/revoke", nil, http.StatusNoContent, nil)
}

func admin(t testing.TB, path string, body []byte, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gw.adminURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+gw.adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("POST %s = %d %s, want %d", path, resp.StatusCode, b.String(), want)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("POST %s: decode: %v", path, err)
		}
	}
}

// attempts counts the HTTP requests a client sends (each retry is one).
type attempts struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (a *attempts) RoundTrip(r *http.Request) (*http.Response, error) {
	a.n.Add(1)
	return a.next.RoundTrip(r)
}

// countingClient is an http.Client that counts its attempts; each test
// gets a fresh one (its own connections).
func countingClient() (*http.Client, *attempts) {
	a := &attempts{next: &http.Transport{}}
	return &http.Client{Transport: a, Timeout: 60 * time.Second}, a
}

// checkRefusal fails unless err carries want where the SDK keeps a
// provider's message: in its text, or (openai-go prints only the status, on
// purpose) in its typed error's message or response body.
func checkRefusal(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %q", what, want)
	}
	text := err.Error()
	var oe *openai.Error
	if errors.As(err, &oe) {
		text += " " + oe.Message
		if oe.Response != nil {
			text += " " + string(oe.DumpResponse(true))
		}
	}
	if !strings.Contains(text, want) {
		t.Fatalf("%s: error %q, want it to carry %q", what, text, want)
	}
}

// release lets the stand-in send the next event of gated stream id.
func release(t testing.TB, id string) {
	t.Helper()
	resp, err := http.Post(up.URL+"/_ctl/release?id="+id, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// streamID is a fresh id for a gated or held stream.
func streamID() string { return randHex(6) }

// checkCredentials fails unless every credential the stand-in saw from
// index from on is the real key of its provider: the gateway forwarded no
// gateway token and no other key.
func checkCredentials(t *testing.T, from int) {
	t.Helper()
	seen := up.credentials()[from:]
	if len(seen) == 0 {
		t.Fatal("the stand-in saw no request")
	}
	for _, c := range seen {
		if c.Credential != realKeys[c.Provider] {
			t.Errorf("upstream %s got credential %.12q..., want only the real key", c.Provider, c.Credential)
		}
	}
}

// checkNoStall fails if a gated stream's events did not reach the client
// while the stream was open (the gateway buffered them).
func checkNoStall(t *testing.T) {
	t.Helper()
	if s := up.stalled(); len(s) > 0 {
		t.Fatalf("stream events were held back (buffered): %v", s)
	}
}

// checkWholeStream fails unless a gated stream of 5 events ended without
// error (err from the SDK), arrived whole and in order, was never held
// back, and reached the upstream with only real keys (from: the count of
// credentials the stand-in had seen before the test).
func checkWholeStream(t *testing.T, err error, got string, from int) {
	t.Helper()
	if err != nil {
		t.Fatalf("stream: %v (read %q)", err, got)
	}
	if got != "e0e1e2e3e4" {
		t.Fatalf("stream text = %q, want e0e1e2e3e4 (whole, in order)", got)
	}
	checkNoStall(t)
	checkCredentials(t, from)
}

// checkOneAttempt fails unless the client sent exactly one request: a
// refusal is not retried.
func checkOneAttempt(t *testing.T, n *attempts) {
	t.Helper()
	if got := n.n.Load(); got != 1 {
		t.Fatalf("attempts = %d, want 1 (a refusal is not retried)", got)
	}
}
