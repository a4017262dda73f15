// Package tlsfile builds custody's TLS configurations from PEM files.
//
// # Serving
//
// A [Reloader] serves the certificate chain and private key held in two PEM
// files (the certificate file: the leaf first, then any intermediates; the
// key file: PKCS #1, PKCS #8 or SEC 1) and reads both again every
// Options.Interval. A Secret mounted as a volume changes under a running
// pod when cert-manager renews it (the kubelet swaps the files in one
// rename); from the next check on, new handshakes get the new certificate
// while open connections keep theirs, so nothing restarts and no
// connection is dropped. A pair that does not load (a half-written file, a
// key that does not match the certificate, no certificate at all, a key
// file others may read or group or others may write:
// [ErrKeyPermissions]) is
// logged and ignored: the last good pair stays in service, and the check
// runs again at the next interval. So is a certificate out of its
// validity period (expired, or not yet valid) in place of one in service. Only [New] fails on such a pair,
// because then there is nothing to serve.
//
// An optional client CA bundle (Options.ClientCAFile) is reloaded the same
// way; [Reloader.ServerConfig] with a client-auth mode verifies client
// certificates (mutual TLS) against the bundle current at the handshake.
//
// Every configuration has TLS 1.2 as its minimum; Go negotiates TLS 1.3
// whenever the peer offers it, and its TLS 1.2 cipher suites are the AEAD
// ones with forward secrecy. Servers offer HTTP/1.1 only (see
// [Reloader.ServerConfig]).
//
// # Clients
//
// [ClientConfig] is the client side: a configuration that trusts only the
// CA certificates of one PEM bundle (custody's CUSTODY_CA_FILE), or the
// system roots when no file is named.
package tlsfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// MinVersion is the lowest TLS version custody speaks, as server and as
// client.
const MinVersion = tls.VersionTLS12

// ErrNoCertificates is returned (wrapped, with the file name) for a CA
// bundle file that holds no PEM certificate.
var ErrNoCertificates = errors.New("no PEM certificate in file")

// ClientConfig returns a client configuration that trusts only the CA
// certificates in the PEM bundle caFile, or the system roots when caFile
// is empty. The server's name is checked against its certificate as
// usual. Errors: caFile cannot be read, or holds no certificate
// ([ErrNoCertificates]).
func ClientConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: MinVersion}
	if caFile == "" {
		return cfg, nil
	}
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, err
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// ClientTransport is http.DefaultTransport's settings (proxy from the
// environment, timeouts, idle connections) with [ClientConfig](caFile).
func ClientTransport(caFile string) (*http.Transport, error) {
	cfg, err := ClientConfig(caFile)
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return t, nil
}

// loadPool reads a PEM bundle of CA certificates.
func loadPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	return parsePool(file, data)
}

func parsePool(file string, data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA bundle %s: %w", file, ErrNoCertificates)
	}
	return pool, nil
}
