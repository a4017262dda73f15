// Package staticauth is the "static" auth method, for use outside
// Kubernetes and for local runs: a file maps the SHA-256 of bearer tokens
// to identities, and a caller presenting such a token at
// POST /v1/auth/static is exchanged for the same kind of short-lived key
// as the Kubernetes method. It is off unless a file is configured.
//
// # Format
//
// The file is YAML (or JSON), unknown fields are an error:
//
//	tokens:
//	  - sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//	    tenant: local
//	    agent: dev
//	    session: laptop
//
// sha256 is the lowercase hex SHA-256 of the token's bytes (as printed by
// `printf %s "$TOKEN" | sha256sum`). The file (after symlinks) is read
// again when it changes, so entries can be added or removed without a
// restart: when its device, inode, size, modification time or change
// time differs from the last read, and on every exchange while its
// change time is within two seconds of the read (a write in the same
// clock tick leaves them all as they were), so that a file replaced by
// one of the same size and modification time (cp -p, rsync -a, tar, a
// Nix store path) is still read. A file that fails to parse keeps the
// last good entries and is logged; a deleted file accepts no token until
// it is back.
package staticauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/filestamp"
)

// ErrUnknownToken: no entry has the token's hash.
var ErrUnknownToken = errors.New("static token not recognised")

// File is the parsed token file.
type File struct {
	Tokens []Entry `json:"tokens"`
}

// Entry maps one token hash to an identity.
type Entry struct {
	SHA256  string `json:"sha256"`
	Tenant  string `json:"tenant"`
	Agent   string `json:"agent"`
	Session string `json:"session"`
}

// Parse parses and validates a token file.
func Parse(data []byte) (map[[32]byte]apikey.Identity, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("staticauth: parse: %w", err)
	}
	out := make(map[[32]byte]apikey.Identity, len(f.Tokens))
	for i, e := range f.Tokens {
		var h [32]byte
		if len(e.SHA256) != 64 {
			return nil, fmt.Errorf("staticauth: tokens[%d].sha256: want 64 hex digits", i)
		}
		if _, err := hex.Decode(h[:], []byte(e.SHA256)); err != nil {
			return nil, fmt.Errorf("staticauth: tokens[%d].sha256: %w", i, err)
		}
		for field, v := range map[string]string{"tenant": e.Tenant, "agent": e.Agent, "session": e.Session} {
			if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
				return nil, fmt.Errorf("staticauth: tokens[%d].%s %q: %s", i, field, v, errs[0])
			}
		}
		if _, dup := out[h]; dup {
			return nil, fmt.Errorf("staticauth: tokens[%d]: duplicate sha256", i)
		}
		out[h] = apikey.Identity{Tenant: e.Tenant, Agent: e.Agent, Session: e.Session, Method: "static"}
	}
	return out, nil
}

// Authenticator serves the static method from a file. It is safe for
// concurrent use.
type Authenticator struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	entries map[[32]byte]apikey.Identity
	// read is the stamp of the file entries came from; zero when the
	// file must be read again at the next exchange.
	read filestamp.Stamp
}

var _ apikey.Authenticator = (*Authenticator)(nil)

// Load reads path and returns an Authenticator. A file that is missing or
// invalid at start-up is an error.
func Load(path string, log *slog.Logger) (*Authenticator, error) {
	if log == nil {
		log = slog.Default()
	}
	a := &Authenticator{path: path, log: log.With("service", "staticauth")}
	if err := a.reload(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Authenticator) reload() error {
	fi, err := os.Stat(a.path)
	if errors.Is(err, fs.ErrNotExist) && a.entries != nil {
		// Deleting the file revokes every entry: fail closed.
		a.entries, a.read = map[[32]byte]apikey.Identity{}, filestamp.Stamp{}
		return fmt.Errorf("staticauth: %w; no static tokens accepted until it is back", err)
	}
	if err != nil {
		return fmt.Errorf("staticauth: %w", err)
	}
	stamp, settled := filestamp.Of(fi, time.Now())
	if a.entries != nil && a.read != (filestamp.Stamp{}) && stamp == a.read {
		return nil
	}
	data, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("staticauth: %w", err)
	}
	entries, err := Parse(data)
	if err != nil {
		return err
	}
	a.entries, a.read = entries, filestamp.Stamp{}
	if settled {
		a.read = stamp
	}
	return nil
}

// Authenticate returns the identity of the entry whose sha256 is the
// token's, or ErrUnknownToken.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (apikey.Identity, error) {
	h := sha256.Sum256([]byte(token))
	a.mu.Lock()
	if err := a.reload(); err != nil {
		a.log.ErrorContext(ctx, "static token file reload failed; keeping last good entries", "err", err)
	}
	id, ok := a.entries[h]
	a.mu.Unlock()
	if !ok {
		return apikey.Identity{}, ErrUnknownToken
	}
	return id, nil
}

// Refusal maps an Authenticate error to what the caller sees.
func Refusal(err error) apikey.Refusal {
	return apikey.Refusal{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "token refused"}
}
