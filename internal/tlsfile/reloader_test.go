package tlsfile_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentcustody/custody/internal/tlsfile"
	"github.com/agentcustody/custody/internal/tlsfile/tlsfiletest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a CA, a serving pair on disk and a Reloader over it.
type env struct {
	ca    *tlsfiletest.CA
	dir   string
	files tlsfiletest.Files
	r     *tlsfile.Reloader
}

func newEnv(t testing.TB, clientCA bool) *env {
	t.Helper()
	ca, err := tlsfiletest.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{ca: ca, dir: t.TempDir()}
	if e.files, err = ca.WriteFiles(e.dir, "server", tlsfiletest.Leaf{Names: []string{"custody.test", "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	opts := tlsfile.Options{CertFile: e.files.Cert, KeyFile: e.files.Key, Interval: time.Hour}
	if clientCA {
		opts.ClientCAFile = e.files.CA
	}
	if e.r, err = tlsfile.New(opts); err != nil {
		t.Fatal(err)
	}
	return e
}

// rotate issues a new leaf and swaps it in the way the kubelet updates a
// Secret volume: written aside, then renamed over the old files.
func (e *env) rotate(t *testing.T) *x509.Certificate {
	t.Helper()
	cert, key, err := e.ca.Issue(tlsfiletest.Leaf{Names: []string{"custody.test", "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	replace(t, e.files.Cert, cert)
	replace(t, e.files.Key, key)
	c, _ := tls.X509KeyPair(cert, key)
	return c.Leaf
}

func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// serve accepts TLS connections with cfg until the test ends; each
// connection completes its handshake and echoes one byte.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				b := make([]byte, 1)
				if _, err := c.Read(b); err == nil {
					c.Write(b)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with addr as serverName and returns the peer's leaf, or
// the handshake error.
func dial(t *testing.T, addr, serverName string, cfg *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName = serverName
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate only on the first read.
	if _, err := c.Write([]byte{1}); err != nil {
		return nil, err
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func clientConfig(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	cfg, err := tlsfile.ClientConfig(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestReloadServesNewCertificateToNewHandshakes(t *testing.T) {
	e := newEnv(t, false)
	addr := serve(t, e.r.ServerConfig(tls.NoClientCert))
	cc := clientConfig(t, e.files.CA)
	first, err := dial(t, addr, "custody.test", cc)
	if err != nil {
		t.Fatal(err)
	}
	// A connection opened before the rotation keeps working after it.
	cfg := cc.Clone()
	cfg.ServerName = "custody.test"
	open, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	next := e.rotate(t)
	if changed, err := e.r.Reload(); !changed || err != nil {
		t.Fatalf("Reload() = %v, %v; want true, nil", changed, err)
	}
	got, err := dial(t, addr, "custody.test", cc)
	if err != nil {
		t.Fatal(err)
	}
	if got.SerialNumber.Cmp(next.SerialNumber) != 0 || got.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatalf("after reload the server presents serial %v, want the new %v (old %v)", got.SerialNumber, next.SerialNumber, first.SerialNumber)
	}
	if _, err := open.Write([]byte{1}); err != nil {
		t.Fatalf("connection opened before the reload: %v", err)
	}
	if _, err := open.Read(make([]byte, 1)); err != nil {
		t.Fatalf("connection opened before the reload: %v", err)
	}
	if changed, err := e.r.Reload(); changed || err != nil {
		t.Fatalf("Reload() of unchanged files = %v, %v; want false, nil", changed, err)
	}
}

func TestReloadKeepsLastGoodPair(t *testing.T) {
	e := newEnv(t, false)
	before := e.r.Leaf().SerialNumber
	key, _ := os.ReadFile(e.files.Key)
	keyLine := strings.Split(string(key), "\n")[1] // base64 of the real key
	other, err := tlsfiletest.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	_, strayKey, err := other.Issue(tlsfiletest.Leaf{Names: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		file string
		data []byte
	}{
		{"half-written certificate", e.files.Cert, []byte("-----BEGIN CERTIFICATE-----\nMIIB")},
		{"key of another certificate", e.files.Key, strayKey},
		{"empty key", e.files.Key, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			good, _ := os.ReadFile(c.file)
			defer replace(t, c.file, good)
			replace(t, c.file, c.data)
			n := e.r.Failures()
			changed, err := e.r.Reload()
			if changed || err == nil {
				t.Fatalf("Reload() = %v, %v; want false and an error", changed, err)
			}
			if e.r.Failures() != n+1 {
				t.Errorf("Failures() = %d, want %d", e.r.Failures(), n+1)
			}
			if got := e.r.Leaf().SerialNumber; got.Cmp(before) != 0 {
				t.Errorf("serving serial %v after a bad reload, want the last good %v", got, before)
			}
			if strings.Contains(err.Error(), keyLine) {
				t.Errorf("error quotes the key file: %v", err)
			}
		})
	}
	// The good files are back: nothing changed against what is served.
	if changed, err := e.r.Reload(); changed || err != nil {
		t.Fatalf("Reload() after restoring = %v, %v; want false, nil", changed, err)
	}
}

func TestRunPicksUpRotation(t *testing.T) {
	e := newEnv(t, false)
	r, err := tlsfile.New(tlsfile.Options{CertFile: e.files.Cert, KeyFile: e.files.Key, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	next := e.rotate(t)
	deadline := time.Now().Add(10 * time.Second)
	for r.Leaf().SerialNumber.Cmp(next.SerialNumber) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not serve the rotated certificate within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewRefusesBadFiles(t *testing.T) {
	e := newEnv(t, false)
	missing := filepath.Join(e.dir, "missing.pem")
	for _, c := range []struct {
		name string
		opts tlsfile.Options
	}{
		{"no key file", tlsfile.Options{CertFile: e.files.Cert}},
		{"missing certificate", tlsfile.Options{CertFile: missing, KeyFile: e.files.Key}},
		{"key as certificate", tlsfile.Options{CertFile: e.files.Key, KeyFile: e.files.Key}},
		{"client CA without certificates", tlsfile.Options{CertFile: e.files.Cert, KeyFile: e.files.Key, ClientCAFile: e.files.Key}},
		{"negative interval", tlsfile.Options{CertFile: e.files.Cert, KeyFile: e.files.Key, Interval: -time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := tlsfile.New(c.opts); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestClientRefusals(t *testing.T) {
	e := newEnv(t, false)
	addr := serve(t, e.r.ServerConfig(tls.NoClientCert))
	other, err := tlsfiletest.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	otherFiles, err := other.WriteFiles(t.TempDir(), "x", tlsfiletest.Leaf{Names: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := dial(t, addr, "custody.test", clientConfig(t, otherFiles.CA)); !errors.As(err, &unknown) {
		t.Errorf("wrong CA: err = %v, want x509.UnknownAuthorityError", err)
	}
	var host x509.HostnameError
	if _, err := dial(t, addr, "elsewhere.test", clientConfig(t, e.files.CA)); !errors.As(err, &host) {
		t.Errorf("name mismatch: err = %v, want x509.HostnameError", err)
	}

	// An expired certificate: a reload keeps the valid one in service;
	// a server started with it serves it, and clients refuse it.
	cert, key, err := e.ca.Issue(tlsfiletest.Leaf{Names: []string{"custody.test"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	replace(t, e.files.Cert, cert)
	replace(t, e.files.Key, key)
	if changed, err := e.r.Reload(); changed || err == nil {
		t.Fatalf("Reload() to an expired certificate = %v, %v; want false and an error", changed, err)
	}
	if _, err := dial(t, addr, "custody.test", clientConfig(t, e.files.CA)); err != nil {
		t.Errorf("after refusing the expired pair: %v, want the valid one served", err)
	}
	expired, err := tlsfile.New(tlsfile.Options{CertFile: e.files.Cert, KeyFile: e.files.Key})
	if err != nil {
		t.Fatal(err)
	}
	var invalid x509.CertificateInvalidError
	if _, err := dial(t, serve(t, expired.ServerConfig(tls.NoClientCert)), "custody.test", clientConfig(t, e.files.CA)); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Errorf("expired: err = %v, want x509.CertificateInvalidError (Expired)", err)
	}

	// TLS 1.1 and older are refused.
	old := clientConfig(t, e.files.CA)
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := dial(t, addr, "custody.test", old); err == nil {
		t.Error("a TLS 1.1 client completed a handshake")
	}
	if _, err := tlsfile.ClientConfig(filepath.Join(t.TempDir(), "none.pem")); err == nil {
		t.Error("ClientConfig with a missing CA file succeeded")
	}
	if _, err := tlsfile.ClientConfig(e.files.Key); !errors.Is(err, tlsfile.ErrNoCertificates) {
		t.Errorf("ClientConfig(key file) = %v, want ErrNoCertificates", err)
	}
}

// clientWithCert trusts e's CA and presents a client certificate ca
// issued, whatever CAs the server names (Go's client would otherwise send
// none for another CA's certificate).
func (e *env) clientWithCert(t *testing.T, ca *tlsfiletest.CA) *tls.Config {
	t.Helper()
	cert, key, err := ca.Issue(tlsfiletest.Leaf{Names: []string{"operator"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c := clientConfig(t, e.files.CA)
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	return c
}

func TestClientCertificates(t *testing.T) {
	e := newEnv(t, true)
	other, err := tlsfiletest.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(ca *tlsfiletest.CA) *tls.Config { return e.clientWithCert(t, ca) }
	plain := clientConfig(t, e.files.CA)
	for _, c := range []struct {
		name   string
		mode   tls.ClientAuthType
		client *tls.Config
		ok     bool
	}{
		{"optional, none given", tls.VerifyClientCertIfGiven, plain, true},
		{"optional, good one", tls.VerifyClientCertIfGiven, withCert(e.ca), true},
		{"optional, another CA's", tls.VerifyClientCertIfGiven, withCert(other), false},
		{"required, none given", tls.RequireAndVerifyClientCert, plain, false},
		{"required, good one", tls.RequireAndVerifyClientCert, withCert(e.ca), true},
		{"required, another CA's", tls.RequireAndVerifyClientCert, withCert(other), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := serve(t, e.r.ServerConfig(c.mode))
			_, err := dial(t, addr, "custody.test", c.client)
			if (err == nil) != c.ok {
				t.Fatalf("handshake err = %v, want success %v", err, c.ok)
			}
		})
	}
}
