package witness

import (
	"crypto/ed25519"
	"fmt"

	"github.com/agentcustody/custody/internal/keyfile"
)

// LoadOrCreateKey returns the Ed25519 private key in the PEM file at path
// (a "PRIVATE KEY" block, PKCS#8), creating it with mode 0600 if it does
// not exist (see package keyfile).
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	k, err := keyfile.LoadOrCreateEd25519(path)
	if err != nil {
		return nil, fmt.Errorf("witness: key: %w", err)
	}
	return k, nil
}
