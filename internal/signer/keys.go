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
	if errors.Is(err, os.ErrNotExist) && s.opts.Shared {
		return fmt.Errorf("signer: key file %s is missing: with a shared store every replica must be given the log's key, never a new one (make it once with custody keys init)", s.opts.KeyFile)
	}
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
	s.committedKeys = len(keys)
	return nil
}

// key returns the key that signs new records (possibly of a rotation not
// committed yet). Callers hold s.mu.
func (s *Signer) key() *logKey { return s.keys[len(s.keys)-1] }

// committedKey returns the key of the last committed rotation (or the
// base key): the key checkpoints are signed with. Callers hold s.mu.
func (s *Signer) committedKey() *logKey { return s.keys[s.committedKeys-1] }

// committedChain returns the committed keys, oldest first. Callers hold
// s.mu.
func (s *Signer) committedChain() []*logKey { return s.keys[:s.committedKeys] }

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
	if s.opts.Shared {
		return "", fmt.Errorf("%w: the log key is shared by the replicas of a shared store (--database-url); rotating it on one replica would leave the others without the new key, so rotation is not supported there", ErrRotationRefused)
	}
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
		n := len(s.keys)
		t.after = append(t.after, func() { s.committedKeys = n })
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("rotate key: %w", err)
	}
	s.log.InfoContext(ctx, "signing key rotated", "key_id", k.id)
	return k.id, nil
}

// checkKeySignsLog refuses a key chain that did not sign this log: the
// latest checkpoint must verify with the current key (or, before the
// first checkpoint, the last record of "_log" or of an open run must be
// signed by one of the chain's keys). A replica given another key file
// (a typo, a stale Secret) would otherwise sign the shared log with a key
// no trust.json lists. Callers hold s.mu or are New.
func (s *Signer) checkKeySignsLog(ctx context.Context) error {
	if s.size == 0 {
		return nil
	}
	cur := s.key()
	cp, err := s.store.LatestCheckpoint(ctx)
	switch {
	case err == nil:
		v, verr := note.NewVerifier(cur.vkey)
		if verr != nil {
			return fmt.Errorf("signer: %w", verr)
		}
		if _, err := note.Open(cp.Note, note.VerifierList(v)); err != nil {
			return fmt.Errorf("signer: the key in %s (key id %s) did not sign this log's latest checkpoint (size %d): every replica must use the log's own key file", s.opts.KeyFile, cur.id, cp.Size)
		}
		return nil
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("signer: check key: %w", err)
	}
	runs, err := s.store.OpenRuns(ctx)
	if err != nil {
		return fmt.Errorf("signer: check key: %w", err)
	}
	ids := []string{verify.LogRun}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		l, err := s.store.LastLeaf(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("signer: check key: %w", err)
		}
		rec, err := verify.ParseRecord(l.Record)
		if err != nil {
			return fmt.Errorf("signer: check key: record %d: %w", l.Index, err)
		}
		for _, k := range s.keys {
			if k.id == rec.KeyID {
				return nil
			}
		}
		return fmt.Errorf("signer: the key in %s (key id %s) did not sign this log (record %d is signed by %s): every replica must use the log's own key file", s.opts.KeyFile, cur.id, l.Index, rec.KeyID)
	}
	return nil
}

// CreateKeyFile generates a log signing key for origin (the checkpoint
// origin, e.g. "custody.example/log") and writes it to path, mode 0600,
// never overwriting: an existing path is an error wrapping
// fs.ErrExist. It returns the key's note verifier key
// ("<origin>+<hash>+<base64>") for witnesses. Use it to make the one key
// that several replicas share (see [Options.Shared]).
func CreateKeyFile(path, origin string) (string, error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", fmt.Errorf("signer: generate key: %w", err)
	}
	if err := writeKeyFile(path, skey); err != nil {
		return "", err
	}
	return vkey, nil
}

// KeyFileVerifier reads the log signing key at path, checks that it is a
// note signing key for origin, and returns its verifier key. It is how
// `custody keys init` vouches for a key file it keeps.
func KeyFileVerifier(path, origin string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("signer: read key: %w", err)
	}
	s := &Signer{opts: Options{Origin: origin}}
	k, err := s.parseKey(strings.TrimSpace(string(raw)), path)
	if err != nil {
		return "", err
	}
	return k.vkey, nil
}
