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
//
// An existing file (after following symlinks, as a Kubernetes Secret
// volume has them) is refused with [ErrPermissions] if others may read it
// or anyone but its owner may write it (any of mode 0o026): a key others
// can read signs for them, and one others can write is theirs from the
// next start. A Secret mounted with defaultMode 0400 or 0440 passes. The
// mode is that of the file read, not of a path looked up again.
package keyfile

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrPermissions is returned (wrapped, with the file's name and mode) for
// a key file that others may read or anyone but its owner may write.
var ErrPermissions = errors.New("key file is readable by others or writable by group or others")

// badPerm are the mode bits a key file must not have: read by others,
// write by group or others.
const badPerm = 0o026

// CheckMode returns nil if fi, the stat of the private key file name
// (taken from the open file, so that it is the file read), has none of
// mode 0o026, else [ErrPermissions] wrapped with name and mode. The TLS
// key files (internal/tlsfile) are held to it too.
func CheckMode(name string, fi os.FileInfo) error {
	if fi.Mode().Perm()&badPerm != 0 {
		return fmt.Errorf("%s (mode %v): %w", name, fi.Mode().Perm(), ErrPermissions)
	}
	return nil
}

// maxKeyFile bounds what is read of a key file; a PEM Ed25519 key is
// 119 bytes.
const maxKeyFile = 64 << 10

// readKey reads the key file at path, refusing it (before reading) if its
// mode has any of badPerm. The mode checked is the open file's.
func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := CheckMode(path, fi); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, maxKeyFile))
}

// LoadOrCreateEd25519 returns the Ed25519 private key in the PEM file at
// path. If the file does not exist it generates a key and writes it there
// with mode 0600 (creating the directory with 0700), atomically: of two
// concurrent callers, one's key wins and both return it. An existing file
// with a mode others may read or write fails with [ErrPermissions].
func LoadOrCreateEd25519(path string) (ed25519.PrivateKey, error) {
	b, err := readKey(path)
	if err == nil {
		return Parse(b)
	}
	if errors.Is(err, ErrPermissions) {
		return nil, err
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
			b, rerr := readKey(path)
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
