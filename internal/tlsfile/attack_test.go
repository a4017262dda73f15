//go:build unix

package tlsfile_test

import (
	"crypto/tls"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/tlsfile/tlsfiletest"
)

// TestAttackReloadSpecialFiles replaces a served file with what a
// regular file read cannot end on: Reload returns an error at once (the
// previous pair stays in service) instead of blocking forever with its
// mutex held, which would stop every later reload, or reading without
// end.
func TestAttackReloadSpecialFiles(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"FIFO with no writer", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}},
		{"symlink to /dev/zero", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, false)
			before := e.r.Leaf().SerialNumber
			if err := os.Remove(e.files.Cert); err != nil {
				t.Fatal(err)
			}
			c.make(t, e.files.Cert)
			done := make(chan error, 1)
			go func() { _, err := e.r.Reload(); done <- err }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Reload() = nil error, want one")
				}
			case <-time.After(5 * time.Second):
				// Unblock the reader (a writer that closes at once) so
				// the goroutine ends before goleak looks.
				if f, err := os.OpenFile(e.files.Cert, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				<-done
				t.Fatal("Reload() still blocked after 5 s")
			}
			if got := e.r.Leaf().SerialNumber; got.Cmp(before) != 0 {
				t.Errorf("serving serial %v, want the last good %v", got, before)
			}
		})
	}
}

// TestAttackResumptionAfterClientCARotation: an operator's TLS session,
// resumed after the client CA bundle was replaced by one without its
// CA, must not skip the certificate check the bundle now fails.
func TestAttackResumptionAfterClientCARotation(t *testing.T) {
	e := newEnv(t, true)
	other, err := tlsfiletest.NewCA("next operators CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := e.ca.Issue(tlsfiletest.Leaf{Names: []string{"operator"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	present := true
	client := clientConfig(t, e.files.CA)
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if present {
			return &pair, nil
		}
		return &tls.Certificate{}, nil
	}
	addr := serve(t, e.r.ServerConfig(tls.RequireAndVerifyClientCert))
	if _, err := dial(t, addr, "custody.test", client); err != nil {
		t.Fatalf("operator handshake: %v", err)
	}
	replace(t, e.files.CA, other.PEM)
	if changed, err := e.r.Reload(); !changed || err != nil {
		t.Fatalf("Reload() = %v, %v", changed, err)
	}
	present = false
	if _, err := dial(t, addr, "custody.test", client); err == nil {
		t.Fatal("a session of a CA no longer trusted resumed without a certificate")
	}
}

// TestAttackClientCABrokenKeepsVerifying: a client CA bundle that turns
// garbage, empty or unreadable under a running server leaves the last
// good bundle verifying client certificates (never a configuration
// without ClientCAs, which Go would verify against the system roots).
func TestAttackClientCABrokenKeepsVerifying(t *testing.T) {
	other, err := tlsfiletest.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) { replace(t, path, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n")) }},
		{"empty", func(t *testing.T, path string) { replace(t, path, nil) }},
		{"unreadable", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, true)
			addr := serve(t, e.r.ServerConfig(tls.RequireAndVerifyClientCert))
			good, bad := e.clientWithCert(t, e.ca), e.clientWithCert(t, other)
			c.spoil(t, e.files.CA)
			if _, err := e.r.Reload(); err == nil {
				t.Fatal("Reload() = nil error for a broken client CA file")
			}
			if _, err := dial(t, addr, "custody.test", good); err != nil {
				t.Errorf("operator of the last good CA refused: %v", err)
			}
			if _, err := dial(t, addr, "custody.test", bad); err == nil {
				t.Error("another CA's certificate accepted after the bundle broke")
			}
		})
	}
}
