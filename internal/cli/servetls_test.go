package cli

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/tlsfile"
	"github.com/agentcustody/custody/internal/tlsfile/tlsfiletest"
)

// tlsServe is a `custody serve` over TLS on every listener, with static
// auth, an admin token and an admin client CA.
type tlsServe struct {
	dir                         string
	ca, clientCA                *tlsfiletest.CA
	files                       tlsfiletest.Files
	clientCAFile                string
	api, admin, gateway, metric string
	env                         Env
}

func startTLSServe(t *testing.T, adminToken bool, extra ...string) *tlsServe {
	t.Helper()
	s := &tlsServe{dir: t.TempDir()}
	var err error
	if s.ca, err = tlsfiletest.NewCA("custody test CA"); err != nil {
		t.Fatal(err)
	}
	if s.files, err = s.ca.WriteFiles(s.dir, "server", tlsfiletest.Leaf{Names: []string{"localhost", "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if s.clientCA, err = tlsfiletest.NewCA("operators CA"); err != nil {
		t.Fatal(err)
	}
	s.clientCAFile = filepath.Join(s.dir, "operators-ca.pem")
	must(t, os.WriteFile(s.clientCAFile, s.clientCA.PEM, 0o600))
	token := "tls-dev-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	must(t, os.WriteFile(filepath.Join(s.dir, "tokens.yaml"), []byte("tokens:\n  - sha256: "+hex.EncodeToString(sum[:])+"\n    tenant: local\n    agent: dev\n    session: laptop\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(s.dir, "token"), []byte(token+"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(s.dir, "admin"), []byte("admin-token-0123456789abcdef-0123456789\n"), 0o600))
	s.api, s.admin, s.gateway, s.metric = freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	args := append([]string{"serve", "--kubernetes-auth=false", "--static-tokens-file=" + filepath.Join(s.dir, "tokens.yaml"),
		"--listen=" + s.api, "--admin-listen=" + s.admin, "--gateway-listen=" + s.gateway, "--metrics-listen=" + s.metric,
		"--tls-cert-file=" + s.files.Cert, "--tls-key-file=" + s.files.Key, "--tls-reload-interval=1s",
		"--admin-client-ca-file=" + s.clientCAFile, "--data-dir=" + filepath.Join(s.dir, "data"), "--log-level=error"}, extra...)
	if adminToken {
		args = append(args, "--admin-token-file="+filepath.Join(s.dir, "admin"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if code, _, stderr := runCLI(t, ctx, envMap(nil), "", args...); code != 0 && ctx.Err() == nil {
			t.Errorf("serve exit %d: %s", code, stderr)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	s.env = envMap(map[string]string{"CUSTODY_URL": "https://localhost:" + port(s.api), "CUSTODY_TOKEN_FILE": filepath.Join(s.dir, "token"),
		"CUSTODY_AUTH": "static", "CUSTODY_CA_FILE": s.files.CA})
	hc := s.client(t, nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := hc.Get("https://" + s.api + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("custody did not answer over TLS: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// client trusts the serving CA and presents cert, if any.
func (s *tlsServe) client(t *testing.T, cert *tls.Certificate) *http.Client {
	t.Helper()
	cfg, err := tlsfile.ClientConfig(s.files.CA)
	must(t, err)
	if cert != nil {
		// Presented whatever CAs the server names (Go's client would
		// otherwise send none for another CA's certificate).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func (s *tlsServe) operatorCert(t *testing.T, ca *tlsfiletest.CA) *tls.Certificate {
	t.Helper()
	c, k, err := ca.Issue(tlsfiletest.Leaf{Names: []string{"operator"}, Client: true})
	must(t, err)
	pair, err := tls.X509KeyPair(c, k)
	must(t, err)
	return &pair
}

func status(t *testing.T, hc *http.Client, method, url, bearer string) (int, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	must(t, err)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.TLS == nil {
		t.Errorf("%s: answered without TLS", url)
	} else if resp.TLS.Version < tls.VersionTLS12 || resp.TLS.NegotiatedProtocol == "h2" {
		t.Errorf("%s: TLS version %x, protocol %q; want 1.2+ and HTTP/1.1", url, resp.TLS.Version, resp.TLS.NegotiatedProtocol)
	}
	return resp.StatusCode, nil
}

func TestServeTLSOnEveryListener(t *testing.T) {
	s := startTLSServe(t, true)
	hc := s.client(t, nil)
	ctx := t.Context()

	for _, u := range []string{"https://" + s.api + "/healthz", "https://" + s.metric + "/metrics", "https://" + s.gateway + "/anthropic/v1/messages"} {
		if _, err := status(t, hc, http.MethodGet, u, ""); err != nil {
			t.Errorf("GET %s: %v", u, err)
		}
	}
	// Plain HTTP to a TLS listener gets net/http's 400, never a response.
	resp, err := http.Get("http://" + s.api + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS API listener: %d, want 400", resp.StatusCode)
		}
	}

	// The agent commands over TLS, trusting CUSTODY_CA_FILE.
	if code, out, stderr := runCLI(t, ctx, s.env, "", "memory", "remember", "--kind=fact", "over TLS"); code != 0 || !strings.Contains(out, `"created"`) {
		t.Fatalf("remember over TLS = %d %s %s", code, out, stderr)
	}
	// Another CA: a clear refusal naming the certificate problem.
	other, err := tlsfiletest.NewCA("someone else")
	must(t, err)
	otherCA := filepath.Join(t.TempDir(), "other.pem")
	must(t, os.WriteFile(otherCA, other.PEM, 0o600))
	wrong := envMap(map[string]string{"CUSTODY_URL": "https://localhost:" + port(s.api), "CUSTODY_TOKEN_FILE": filepath.Join(s.dir, "token"), "CUSTODY_AUTH": "static", "CUSTODY_CA_FILE": otherCA})
	if code, _, stderr := runCLI(t, ctx, wrong, "", "login"); code == 0 || !strings.Contains(stderr, "certificate signed by unknown authority") {
		t.Errorf("login trusting another CA = %d %q; want a refusal naming the unknown authority", code, stderr)
	}
	if code, _, stderr := runCLI(t, ctx, envMap(map[string]string{"CUSTODY_URL": "https://localhost:" + port(s.api), "CUSTODY_TOKEN_FILE": filepath.Join(s.dir, "token"), "CUSTODY_AUTH": "static", "CUSTODY_CA_FILE": filepath.Join(s.dir, "token")}), "", "login"); code == 0 || !strings.Contains(stderr, "no PEM certificate") {
		t.Errorf("login with a CA file that is not one = %d %q", code, stderr)
	}
	// A name the certificate does not carry.
	cfg, _ := tlsfile.ClientConfig(s.files.CA)
	cfg.ServerName = "custody.elsewhere"
	_, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get("https://" + s.api + "/healthz")
	var host x509.HostnameError
	if !errors.As(err, &host) {
		t.Errorf("name mismatch: %v, want x509.HostnameError", err)
	}

	// The admin listener: the bearer token, or an operator certificate.
	trust := "https://" + s.admin + "/v1/signer/trust"
	for _, c := range []struct {
		name   string
		cert   *tls.Certificate
		bearer string
		want   int
	}{
		{"nothing", nil, "", http.StatusUnauthorized},
		{"bearer", nil, "admin-token-0123456789abcdef-0123456789", http.StatusOK},
		{"operator certificate", s.operatorCert(t, s.clientCA), "", http.StatusOK},
	} {
		got, err := status(t, s.client(t, c.cert), http.MethodGet, trust, c.bearer)
		if err != nil || got != c.want {
			t.Errorf("admin with %s: %d %v, want %d", c.name, got, err, c.want)
		}
	}
	// A certificate from the serving CA is not an operator's.
	if _, err := status(t, s.client(t, s.operatorCert(t, s.ca)), http.MethodGet, trust, ""); err == nil {
		t.Error("admin accepted a client certificate the operators CA did not issue")
	}
}

func TestServeTLSAdminRequiresClientCertificate(t *testing.T) {
	s := startTLSServe(t, false)
	trust := "https://" + s.admin + "/v1/signer/trust"
	if _, err := status(t, s.client(t, nil), http.MethodGet, trust, "admin-token-0123456789abcdef-0123456789"); err == nil {
		t.Error("admin without a client certificate completed a request; want the handshake refused")
	}
	if got, err := status(t, s.client(t, s.operatorCert(t, s.clientCA)), http.MethodGet, trust, ""); err != nil || got != http.StatusOK {
		t.Errorf("admin with an operator certificate: %d %v", got, err)
	}
	// The operator commands: custody trust with a client certificate
	// and the CA from $CUSTODY_CA_FILE, no bearer token.
	op, err := s.clientCA.WriteFiles(t.TempDir(), "operator", tlsfiletest.Leaf{Names: []string{"operator"}, Client: true})
	must(t, err)
	env := envMap(map[string]string{"CUSTODY_CA_FILE": s.files.CA})
	code, out, stderr := runCLI(t, t.Context(), env, "", "trust", "--admin=https://localhost:"+port(s.admin),
		"--client-cert-file="+op.Cert, "--client-key-file="+op.Key, "-o", "-")
	if code != 0 || !strings.Contains(out, `"origin"`) {
		t.Errorf("custody trust with a client certificate = %d %q %q", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, t.Context(), env, "", "trust", "--admin=https://localhost:"+port(s.admin), "-o", "-"); code != 2 || !strings.Contains(stderr, "no admin credential") {
		t.Errorf("custody trust without a credential = %d %q, want exit 2 naming the missing credential", code, stderr)
	}
}

// TestServeTLSRotationUnderLoad rotates the serving certificate three
// times under steady requests, on kept-alive and on new connections: no
// request fails, and new handshakes see every new certificate.
func TestServeTLSRotationUnderLoad(t *testing.T) {
	s := startTLSServe(t, true)
	var (
		ok, failed atomic.Int64
		mu         sync.Mutex
		serials    = map[string]bool{}
		firstErr   atomic.Value
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := s.client(t, nil)
			hc.Transport.(*http.Transport).DisableKeepAlives = w%2 == 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := hc.Get("https://" + s.api + "/healthz")
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, errors.New(resp.Status))
					continue
				}
				ok.Add(1)
				mu.Lock()
				serials[resp.TLS.PeerCertificates[0].SerialNumber.String()] = true
				mu.Unlock()
			}
		}()
	}
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		c, k, err := s.ca.Issue(tlsfiletest.Leaf{Names: []string{"localhost", "127.0.0.1"}})
		must(t, err)
		// Written aside and renamed in, as the kubelet updates a Secret.
		must(t, os.WriteFile(s.files.Key+".new", k, 0o600))
		must(t, os.WriteFile(s.files.Cert+".new", c, 0o600))
		must(t, os.Rename(s.files.Key+".new", s.files.Key))
		must(t, os.Rename(s.files.Cert+".new", s.files.Cert))
		want := serialOf(t, c)
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			seen := serials[want]
			mu.Unlock()
			if seen {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no handshake saw the rotated certificate %s within 10 s", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during rotation; first: %v", failed.Load(), failed.Load()+ok.Load(), firstErr.Load())
	}
	if len(serials) != 4 {
		t.Errorf("saw %d certificates, want the first and 3 rotated", len(serials))
	}
	t.Logf("%d requests, none failed, across %d certificates", ok.Load(), len(serials))
}

func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	must(t, err)
	return c.SerialNumber.String()
}

func TestServeTLSConfigErrors(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no certificate, no plaintext", nil, "no TLS certificate for the [api gateway admin metrics] listeners"},
		{"unknown plaintext listener", []string{"--plaintext=web"}, `--plaintext "web"`},
		{"certificate without key", []string{"--plaintext=all", "--tls-cert-file=x.pem"}, "go together"},
		{"client CA on a plaintext admin", []string{"--plaintext=all", "--admin-client-ca-file=ca.pem"}, "needs TLS on the admin listener"},
		{"reload interval", []string{"--plaintext=all", "--tls-reload-interval=10ms"}, "--tls-reload-interval"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--kubernetes-auth=false", "--static-tokens-file=t.yaml", "--admin-token-file=a"}, c.args...)
			code, _, stderr := runCLI(t, ctx, envMap(nil), "", args...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Fatalf("serve %v = %d %q; want exit 2 naming %q", c.args, code, stderr, c.want)
			}
		})
	}
}
