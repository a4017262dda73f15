package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestAttackOpenWithoutSSLModeSendsPasswordInClear: a database URL
// without sslmode (as in README's "Several replicas" example,
// postgres://custody:...@db:5432/custody) gets pgx's default, prefer:
// TLS is tried without verifying the server, and when the server
// declines it the connection is made again in plaintext. Anyone on the
// path to the database (or who can take its address) declines TLS, asks
// for AuthenticationCleartextPassword and receives the password; after
// that, every key hash, memory and signer row crosses in clear. custody
// fails closed elsewhere (every listener needs TLS unless --plaintext
// says otherwise) but here fails open on an absent setting. Open must
// refuse a URL that does not choose its sslmode (or default to
// verify-full), so that no password is ever sent to a server that
// declined TLS.
func TestAttackOpenWithoutSSLModeSendsPasswordInClear(t *testing.T) {
	const password = "hunter2-db-password"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []byte // what the client sent after the server declined TLS
		wg  sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				var hdr [8]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				if binary.BigEndian.Uint32(hdr[4:]) == 80877103 { // SSLRequest
					if _, err := c.Write([]byte("N")); err != nil {
						return
					}
					if _, err := io.ReadFull(c, hdr[:4]); err != nil {
						return
					}
				}
				// StartupMessage (length in hdr[:4]): read the rest.
				n := int(binary.BigEndian.Uint32(hdr[:4]))
				if n < 8 || n > 1<<16 {
					return
				}
				rest := make([]byte, n-8)
				if _, err := io.ReadFull(c, rest); err != nil {
					return
				}
				// AuthenticationCleartextPassword.
				if _, err := c.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 3}); err != nil {
					return
				}
				buf := make([]byte, 256)
				k, _ := io.ReadAtLeast(c, buf, 1)
				mu.Lock()
				got = append(got, buf[:k]...)
				mu.Unlock()
			}()
		}
	}()
	defer func() { ln.Close(); wg.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := Open(ctx, "postgres://custody:"+password+"@"+ln.Addr().String()+"/custody?connect_timeout=5")
	if err == nil {
		db.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if bytes.Contains(got, []byte(password)) {
		t.Fatalf("Open of a URL without sslmode sent the database password in clear to a server that declined TLS (%q); Open returned %v", got, err)
	}
}

// TestOpenRefusesTLSDowngrade: an sslmode that mixes TLS and plaintext
// attempts (none set, prefer, allow; in the URL, a key=value string or
// PGSSLMODE) or does TLS without checking the server (require) is
// refused before any connection; verify-ca, verify-full and disable get
// past the check (to a port where nothing listens, so the connection
// fails).
func TestOpenRefusesTLSDowngrade(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{
		"postgres://custody:pw@127.0.0.1:1/custody",
		"postgres://custody:pw@127.0.0.1:1/custody?sslmode=prefer",
		"postgres://custody:pw@127.0.0.1:1/custody?sslmode=allow",
		"host=127.0.0.1 port=1 user=custody password=pw dbname=custody",
		"postgres://custody:pw@127.0.0.1:1,127.0.0.1:2/custody?sslmode=prefer",
		"postgres://custody:pw@127.0.0.1:1/custody?sslmode=require",
	} {
		if _, err := Open(ctx, dsn); !errors.Is(err, errTLSUnchecked) {
			t.Errorf("Open(%s) = %v, want errTLSUnchecked", dsn, err)
		}
	}
	t.Setenv("PGSSLMODE", "prefer")
	if _, err := Open(ctx, "postgres://custody:pw@127.0.0.1:1/custody"); !errors.Is(err, errTLSUnchecked) {
		t.Errorf("Open with PGSSLMODE=prefer = %v, want errTLSUnchecked", err)
	}
	for _, mode := range []string{"disable", "verify-ca", "verify-full"} {
		_, err := Open(ctx, "postgres://custody:pw@127.0.0.1:1/custody?connect_timeout=2&sslmode="+mode)
		if err == nil || errors.Is(err, errTLSUnchecked) {
			t.Errorf("Open(sslmode=%s) = %v, want a connection error", mode, err)
		}
	}
}
