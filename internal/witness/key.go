package witness

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

// LoadOrCreateKey returns the Ed25519 private key in the PEM file at path
// (a "PRIVATE KEY" block, PKCS#8). If the file does not exist it generates
// a key and writes it there with mode 0600 (creating the directory with
// 0700), atomically: of two concurrent callers, one's key wins and both
// return it.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return parseKey(b)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("witness: read key: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("witness: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("witness: encode key: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("witness: create key directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".witness-key-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("witness: write key: %w", err)
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
		return nil, fmt.Errorf("witness: write key: %w", err)
	}
	// Link fails if path appeared meanwhile; then the other key wins.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return LoadOrCreateKey(path)
		}
		return nil, fmt.Errorf("witness: write key: %w", err)
	}
	return key, nil
}

func parseKey(b []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New(`witness: key file holds no "PRIVATE KEY" PEM block`)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("witness: parse key: %w", err)
	}
	ed, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("witness: key is %T, want Ed25519", k)
	}
	return ed, nil
}
