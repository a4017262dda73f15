// Package keyfile loads, or creates on first use, the Ed25519 private keys
// custody's services sign with (the gateway's token key, a witness's
// cosigning key).
//
// # Format
//
// One PEM block of type "PRIVATE KEY" holding the key as PKCS#8 DER, in a
// file of mode 0600:
//
//	-----BEGIN PRIVATE KEY-----
//	MC4CAQAwBQYDK2VwBCIEIP...
//	-----END PRIVATE KEY-----
package keyfile

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LoadOrCreateEd25519 returns the Ed25519 private key in the PEM file at
// path. If the file does not exist it generates a key and writes it there
// with mode 0600 (creating the directory with 0700), atomically: of two
// concurrent callers, one's key wins and both return it.
func LoadOrCreateEd25519(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return Parse(b)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read key: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".key-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("write key: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write key: %w", err)
	}
	// Link fails if path appeared meanwhile; then the other key wins. If
	// it "exists" but cannot be read (a dangling symlink), that is an
	// error, not a reason to try again.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				return nil, fmt.Errorf("key %s exists but cannot be read: %w", path, rerr)
			}
			return Parse(b)
		}
		return nil, fmt.Errorf("write key: %w", err)
	}
	return key, nil
}

// Parse decodes a key file's contents.
func Parse(b []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New(`key file holds no "PRIVATE KEY" PEM block`)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	ed, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key is %T, want Ed25519", k)
	}
	return ed, nil
}
