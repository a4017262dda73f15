package postgres

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// TestAttackOpenSSLModeRequireSendsPasswordToMITM: Open refuses prefer
// and allow because whoever sits on the path to the database could ask
// for the password in clear, but it accepts sslmode=require, under which
// pgx does TLS without checking the server's certificate. The same
// attacker answers the SSLRequest with 'S', completes TLS with a
// self-signed certificate, asks for AuthenticationCleartextPassword and
// receives the password (inside a TLS session it terminates itself).
func TestAttackOpenSSLModeRequireSendsPasswordToMITM(t *testing.T) {
	const password = "hunter2-db-password"
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mitm"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []byte
		wg  sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer raw.Close()
				_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
				var hdr [8]byte
				if _, err := io.ReadFull(raw, hdr[:]); err != nil || binary.BigEndian.Uint32(hdr[4:]) != 80877103 {
					return
				}
				if _, err := raw.Write([]byte("S")); err != nil {
					return
				}
				c := tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{cert}})
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				n := int(binary.BigEndian.Uint32(hdr[:4]))
				if n < 8 || n > 1<<16 {
					return
				}
				if _, err := io.ReadFull(c, make([]byte, n-8)); err != nil {
					return
				}
				if _, err := c.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 3}); err != nil {
					return
				}
				buf := make([]byte, 256)
				m, _ := io.ReadAtLeast(c, buf, 1)
				mu.Lock()
				got = append(got, buf[:m]...)
				mu.Unlock()
			}()
		}
	}()
	defer func() { ln.Close(); wg.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := Open(ctx, "postgres://custody:"+password+"@"+ln.Addr().String()+"/custody?connect_timeout=5&sslmode=require")
	if err == nil {
		db.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if bytes.Contains(got, []byte(password)) {
		t.Fatalf("Open(sslmode=require) sent the database password to a server with a self-signed certificate that asked for it in clear (%q); Open returned %v", got, err)
	}
}
