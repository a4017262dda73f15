package signer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
)

// logKey is one of the log's Ed25519 note keys.
type logKey struct {
	id      string
	signer  note.Signer
	pub     ed25519.PublicKey
	vkey    string
	retired int64 // retired_from_index, -1 while current
}

// keyPath is where a key made by [Signer.RotateKey] is kept.
func (s *Signer) keyPath(id string) string { return s.opts.KeyFile + "." + id }

// parseKey parses a note signing key "PRIVATE+KEY+<origin>+<hash>+<base64>".
func (s *Signer) parseKey(skey, path string) (*logKey, error) {
	skey = strings.TrimSpace(skey)
	sg, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("signer: key %s: %w", path, err)
	}
	if sg.Name() != s.opts.Origin {
		return nil, fmt.Errorf("signer: key %s is for %q, origin is %q", path, sg.Name(), s.opts.Origin)
	}
	// "PRIVATE+KEY+<name>+<hash>+<base64(0x01 || seed)>"; base64 may hold '+'.
	prefix := "PRIVATE+KEY+" + sg.Name() + "+"
	seed, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(skey, prefix)[9:])
	if err != nil || len(seed) != 1+ed25519.SeedSize {
		return nil, fmt.Errorf("signer: key %s: malformed", path)
	}
	k := &logKey{signer: sg, retired: -1}
	k.pub = ed25519.NewKeyFromSeed(seed[1:]).Public().(ed25519.PublicKey)
	if k.vkey, err = note.NewEd25519VerifierKey(s.opts.Origin, k.pub); err != nil {
		return nil, fmt.Errorf("signer: verifier key: %w", err)
	}
	k.id = verify.KeyID(s.opts.Origin, k.pub)
	return k, nil
}

// writeKeyFile creates path (mode 0600, never overwriting) holding skey,
// durably: the file and its directory are synced.
func writeKeyFile(path, skey string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("signer: key directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("signer: create key: %w", err)
	}
	_, err = f.WriteString(skey + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if d, derr := os.Open(filepath.Dir(path)); derr == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("signer: write key %s: %w", path, err)
	}
	return nil
}

// loadKey reads or creates the log's first key, Options.KeyFile.
func (s *Signer) loadKey() error {
	raw, err := os.ReadFile(s.opts.KeyFile)
	if errors.Is(err, os.ErrNotExist) {
		skey, _, gerr := note.GenerateKey(rand.Reader, s.opts.Origin)
		if gerr != nil {
			return fmt.Errorf("signer: generate key: %w", gerr)
		}
		if err := writeKeyFile(s.opts.KeyFile, skey); err != nil {
			return err
		}
		raw = []byte(skey)
	} else if err != nil {
		return fmt.Errorf("signer: read key: %w", err)
	}
	k, err := s.parseKey(string(raw), s.opts.KeyFile)
	if err != nil {
		return err
	}
	s.baseKey = k
	return nil
}

// loadKeys rebuilds the key chain from the key.retired records of "_log":
// the first key is Options.KeyFile; each key.retired record retires the
// key before it and is signed by the next one, read from keyPath(its
// key_id). The last key signs. Callers hold s.mu or are New.
func (s *Signer) loadKeys(ctx context.Context) error {
	leaves, err := s.store.RunLeaves(ctx, verify.LogRun)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("signer: load keys: %w", err)
	}
	s.baseKey.retired = -1
	keys := []*logKey{s.baseKey}
	var recs []Leaf
	for _, l := range leaves {
		if l.Type != verify.TypeKeyRetired {
			continue
		}
		rec, err := verify.ParseRecord(l.Record)
		if err != nil {
			return fmt.Errorf("signer: load keys: record %d: %w", l.Index, err)
		}
		cur := keys[len(keys)-1]
		old, _ := rec.Body["key_id"].(string)
		from, ok := rec.Body["retired_from_index"].(int64)
		if old != cur.id || !ok {
			return fmt.Errorf("signer: load keys: key.retired record %d retires %q, current key is %s", l.Index, old, cur.id)
		}
		path := s.keyPath(rec.KeyID)
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("signer: load keys: key %s that signed record %d: %w", rec.KeyID, l.Index, err)
		}
		k, err := s.parseKey(string(raw), path)
		if err != nil {
			return err
		}
		if k.id != rec.KeyID {
			return fmt.Errorf("signer: load keys: %s holds key %s", path, k.id)
		}
		cur.retired = from
		keys = append(keys, k)
		recs = append(recs, l)
	}
	s.keys, s.keyRecs = keys, recs
	return nil
}

// key returns the current signing key. Callers hold s.mu.
func (s *Signer) key() *logKey { return s.keys[len(s.keys)-1] }

// RotateKey replaces the log's signing key. It generates a new Ed25519
// key, stores it in Options.KeyFile + "." + its key id (mode 0600; every
// key is kept), and appends to "_log" a key.retired record with body
// {"key_id": old key id, "retired_from_index": its own index + 1}, signed
// by the new key as the verify package expects. That record and every
// later record and checkpoint are signed by the new key; a record signed
// by the old key at an index >= retired_from_index is refused by
// verify.Verify. The key.retired records are the persistent state: after
// a restart the signer signs with the key of the last one. A rotation that
// fails (e.g. during a rollback) leaves an unused key file behind.
//
// Witnesses that check the log's signature must be given the new
// verifier key ([Signer.VerifierKey]), and verifiers a new trust.json
// ([Signer.Trust]); a trust.json that lists only the old key refuses every
// record and checkpoint signed by the new key.
func (s *Signer) RotateKey(ctx context.Context) (string, error) {
	skey, _, err := note.GenerateKey(rand.Reader, s.opts.Origin)
	if err != nil {
		return "", fmt.Errorf("signer: generate key: %w", err)
	}
	k, err := s.parseKey(skey, "(new key)")
	if err != nil {
		return "", err
	}
	if err := writeKeyFile(s.keyPath(k.id), skey); err != nil {
		return "", err
	}
	err = s.submit(ctx, func(t *txn) error {
		old := s.key()
		from := s.size + 1
		s.keys = append(s.keys, k)
		l, err := t.append(s.logRun, verify.TypeKeyRetired, map[string]any{"key_id": old.id, "retired_from_index": from})
		if err != nil {
			s.keys = s.keys[:len(s.keys)-1]
			return err
		}
		old.retired = from
		s.keyRecs = append(s.keyRecs, l)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("rotate key: %w", err)
	}
	s.log.InfoContext(ctx, "signing key rotated", "key_id", k.id)
	return k.id, nil
}
