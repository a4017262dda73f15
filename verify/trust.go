package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// TrustVersion is the only trust.json format version.
const TrustVersion = 1

// Trust is the verifier's root of trust, read from trust.json (see the
// package doc, # Format). Build it with ParseTrust; Verify re-validates it.
type Trust struct {
	Version       int              `json:"version"`
	Log           TrustLog         `json:"log"`
	Witnesses     []TrustedWitness `json:"witnesses"`
	WitnessQuorum int              `json:"witness_quorum"`
}

// TrustLog names the log and the keys that sign its records and checkpoints.
type TrustLog struct {
	Origin string     `json:"origin"`
	Keys   []TrustKey `json:"keys"`
}

// A TrustKey is one Ed25519 log key. KeyID must equal KeyID(name, pub) where
// name is NoteVerifier's key name, and PublicKey must be NoteVerifier's key.
type TrustKey struct {
	KeyID        string `json:"key_id"`
	PublicKey    string `json:"public_key"`    // base64 of the 32-byte Ed25519 key
	NoteVerifier string `json:"note_verifier"` // note vkey "name+hash+base64(0x01||key)"
	// RetiredFromIndex, if set, retires the key from that log index on: a
	// record signed by it at index >= RetiredFromIndex, or a checkpoint of
	// tree size > RetiredFromIndex signed only by it, is refused.
	RetiredFromIndex *int64 `json:"retired_from_index,omitempty"`
}

// A TrustedWitness is a witness whose cosignatures count toward the quorum.
type TrustedWitness struct {
	Name string `json:"name"`
	VKey string `json:"vkey"` // C2SP vkey, algorithm 0x04 (cosignature/v1) or 0x01
}

// ParseTrust strictly parses and validates trust.json. Errors wrap
// ErrInvalidTrust.
func ParseTrust(b []byte) (Trust, error) {
	var t Trust
	if err := DecodeJSON(b, &t); err != nil {
		return Trust{}, fmt.Errorf("%w: %w", ErrInvalidTrust, err)
	}
	if _, err := t.compile(); err != nil {
		return Trust{}, err
	}
	return t, nil
}

// Marshal returns t as indented JSON, suitable for trust.json.
func (t Trust) Marshal() ([]byte, error) {
	if _, err := t.compile(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// NewTrustKey returns the TrustKey for a log key given its note vkey.
func NewTrustKey(vkey string) (TrustKey, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return TrustKey{}, fmt.Errorf("%w: %w", ErrInvalidTrust, err)
	}
	_, k64, _ := strings.Cut(vkey[len(v.Name())+1:], "+")
	raw, err := base64.StdEncoding.DecodeString(k64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize {
		return TrustKey{}, fmt.Errorf("%w: bad vkey", ErrInvalidTrust)
	}
	return TrustKey{
		KeyID:        fmt.Sprintf("%08x", v.KeyHash()),
		PublicKey:    base64.StdEncoding.EncodeToString(raw[1:]),
		NoteVerifier: vkey,
	}, nil
}

// compiled is a validated Trust ready for verification.
type compiled struct {
	origin    string
	keys      map[string]*logKey // by key id
	noteKeys  map[nameHash]*logKey
	witnesses map[nameHash]*cosigVerifier
	quorum    int
}

type nameHash struct {
	name string
	hash uint32
}

type logKey struct {
	id       string
	pub      ed25519.PublicKey
	verifier note.Verifier
	retired  int64 // first retired index; -1 if not retired
}

func (t Trust) compile() (*compiled, error) {
	bad := func(format string, args ...any) (*compiled, error) {
		return nil, fmt.Errorf("%w: %s", ErrInvalidTrust, fmt.Sprintf(format, args...))
	}
	if t.Version != TrustVersion {
		return bad("version %d, want %d", t.Version, TrustVersion)
	}
	if !validOrigin(t.Log.Origin) {
		return bad("invalid log origin %q", t.Log.Origin)
	}
	if len(t.Log.Keys) == 0 {
		return bad("no log keys")
	}
	c := &compiled{
		origin:    t.Log.Origin,
		keys:      map[string]*logKey{},
		noteKeys:  map[nameHash]*logKey{},
		witnesses: map[nameHash]*cosigVerifier{},
		quorum:    t.WitnessQuorum,
	}
	for i, k := range t.Log.Keys {
		v, err := note.NewVerifier(k.NoteVerifier)
		if err != nil {
			return bad("log key %d: note_verifier: %v", i, err)
		}
		want, err := NewTrustKey(k.NoteVerifier)
		if err != nil {
			return nil, err
		}
		if k.KeyID != want.KeyID || k.PublicKey != want.PublicKey {
			return bad("log key %d: key_id or public_key does not match note_verifier (want %s %s)", i, want.KeyID, want.PublicKey)
		}
		pub, _ := base64.StdEncoding.DecodeString(k.PublicKey)
		lk := &logKey{id: k.KeyID, pub: pub, verifier: v, retired: -1}
		if k.RetiredFromIndex != nil {
			if *k.RetiredFromIndex < 0 {
				return bad("log key %d: negative retired_from_index", i)
			}
			lk.retired = *k.RetiredFromIndex
		}
		if _, dup := c.keys[k.KeyID]; dup {
			return bad("duplicate log key id %s", k.KeyID)
		}
		c.keys[k.KeyID] = lk
		c.noteKeys[nameHash{v.Name(), v.KeyHash()}] = lk
	}
	if t.WitnessQuorum < 0 || t.WitnessQuorum > len(t.Witnesses) {
		return bad("witness_quorum %d with %d witnesses", t.WitnessQuorum, len(t.Witnesses))
	}
	// A signature (note or cosignature/v1) does not cover its signer's
	// name, so one public key trusted under two names verifies the same
	// bytes relabelled as either: it must be one witness, and no witness
	// may hold a log key (the log's own signature would count as a
	// cosignature).
	owner := map[string]string{} // public key -> witness name, or "" for a log key
	for _, k := range c.keys {
		owner[string(k.pub)] = ""
	}
	names := map[string]bool{}
	for i, w := range t.Witnesses {
		names[w.Name] = true
		v, err := parseWitnessKey(w.VKey)
		if err != nil {
			return bad("witness %d: %v", i, err)
		}
		if v.name != w.Name {
			return bad("witness %d: name %q does not match vkey name %q", i, w.Name, v.name)
		}
		if name, seen := owner[string(v.pub)]; seen && name != v.name {
			if name == "" {
				return bad("witness %s has a log key's public key", w.Name)
			}
			return bad("witnesses %s and %s share a public key (one key is one witness)", name, w.Name)
		}
		owner[string(v.pub)] = v.name
		nh := nameHash{v.name, v.hash}
		if _, dup := c.witnesses[nh]; dup {
			return bad("duplicate witness %s", w.Name)
		}
		if _, dup := c.noteKeys[nh]; dup {
			return bad("witness %s has a log key's name and hash", w.Name)
		}
		c.witnesses[nh] = v
	}
	if t.WitnessQuorum > len(names) {
		return bad("witness_quorum %d with %d distinct witnesses (one witness under several keys counts once)", t.WitnessQuorum, len(names))
	}
	return c, nil
}

// logKeyVerifiers implements note.Verifiers over the trusted log keys only:
// note.Open then verifies every log key signature (and fails on an invalid
// one) and leaves witness cosignatures in Note.UnverifiedSigs, for
// [compiled.cosignatures] to check one by one.
type logKeyVerifiers struct{ c *compiled }

func (l logKeyVerifiers) Verifier(name string, hash uint32) (note.Verifier, error) {
	if k, ok := l.c.noteKeys[nameHash{name, hash}]; ok {
		return k.verifier, nil
	}
	return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
}

// cosignatures checks the cosignatures of trusted witnesses on n (from its
// UnverifiedSigs, see logKeyVerifiers) and returns the names of the
// witnesses with at least one valid cosignature, sorted and each once, and
// the "name+keyhash" of trusted witnesses whose cosignatures all fail to
// verify, sorted. A witness trusted under several keys is one name: it is
// valid once if any of them verified, and counts once toward the quorum. An invalid cosignature never counts toward the quorum and
// does not hide a valid one: x/mod's note.Open would refuse the whole note
// for it, so that one misbehaving witness could veto every checkpoint.
// Signatures by keys not in trust are ignored.
func (c *compiled) cosignatures(n *note.Note) (valid, invalid []string) {
	ok := map[nameHash]bool{}
	for _, s := range n.UnverifiedSigs {
		nh := nameHash{s.Name, s.Hash}
		w := c.witnesses[nh]
		if w == nil || ok[nh] {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(s.Base64)
		ok[nh] = err == nil && len(raw) > 4 && w.Verify([]byte(n.Text), raw[4:])
	}
	// A witness is its name: one trusted under several keys (a
	// rotation) counts once, valid if any of its keys verified.
	named := map[string]bool{}
	for nh, good := range ok {
		named[nh.name] = named[nh.name] || good
	}
	for nh, good := range ok {
		if !good && !named[nh.name] {
			invalid = append(invalid, fmt.Sprintf("%s+%08x", nh.name, nh.hash))
		}
	}
	for name, good := range named {
		if good {
			valid = append(valid, name)
		}
	}
	sort.Strings(valid)
	sort.Strings(invalid)
	return valid, invalid
}
