package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// A Checkpoint is the body of a C2SP tlog-checkpoint: the log's origin, its
// tree size and its RFC 6962 root hash, plus optional extension lines.
type Checkpoint struct {
	Origin     string
	TreeSize   int64
	Root       tlog.Hash
	Extensions []string // each a non-empty line without "\n"
}

// MaxTreeSize is the largest tree size a checkpoint may state, 2^62.
// golang.org/x/mod/sumdb/tlog's proof checks (CheckRecord, CheckTree)
// never return for a larger tree, so a checkpoint beyond it would hang
// the verifier and the witness.
const MaxTreeSize = 1 << 62

// FormatCheckpoint returns the checkpoint body text:
//
//	<origin>\n<tree size in decimal>\n<base64 root hash>\n[<extension>\n...]
//
// It is the text of the signed note.
func FormatCheckpoint(c Checkpoint) ([]byte, error) {
	if !validOrigin(c.Origin) || c.TreeSize < 0 || c.TreeSize > MaxTreeSize {
		return nil, fmt.Errorf("%w: invalid origin or size", ErrMalformedCheckpoint)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%d\n%s\n", c.Origin, c.TreeSize, base64.StdEncoding.EncodeToString(c.Root[:]))
	for _, e := range c.Extensions {
		if e == "" || strings.ContainsAny(e, "\n") {
			return nil, fmt.Errorf("%w: invalid extension line", ErrMalformedCheckpoint)
		}
		b.WriteString(e + "\n")
	}
	return b.Bytes(), nil
}

// ParseCheckpoint parses checkpoint body text (a signed note's Text, without
// signatures). It accepts exactly what FormatCheckpoint produces: size in
// decimal without leading zeros and at most [MaxTreeSize], a 32-byte root
// in padded standard base64, and extension lines that are non-empty and
// free of control characters.
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	var c Checkpoint
	bad := func(why string) (Checkpoint, error) {
		return Checkpoint{}, fmt.Errorf("%w: %s", ErrMalformedCheckpoint, why)
	}
	if len(text) == 0 || text[len(text)-1] != '\n' {
		return bad("text does not end in newline")
	}
	lines := strings.Split(string(text[:len(text)-1]), "\n")
	if len(lines) < 3 {
		return bad("fewer than three lines")
	}
	if !validOrigin(lines[0]) {
		return bad("invalid origin line")
	}
	c.Origin = lines[0]
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return bad("invalid tree size")
	}
	if n > MaxTreeSize {
		return bad(fmt.Sprintf("tree size %d above %d", n, int64(MaxTreeSize)))
	}
	c.TreeSize = n
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize {
		return bad("invalid root hash")
	}
	copy(c.Root[:], h)
	for _, e := range lines[3:] {
		if e == "" {
			return bad("empty extension line")
		}
		for i := 0; i < len(e); i++ {
			if e[i] < 0x20 || e[i] == 0x7f {
				return bad("control character in extension line")
			}
		}
		c.Extensions = append(c.Extensions, e)
	}
	return c, nil
}

// EmptyTreeHash returns the RFC 6962 root hash of the empty tree (§2.1:
// MTH({}) = SHA-256()), e3b0c442…b855: the root a checkpoint of tree size 0
// carries. (tlog.TreeHash(0, …) returns the zero hash instead.)
func EmptyTreeHash() tlog.Hash { return sha256.Sum256(nil) }

// C2SP tlog-cosignature/v1 constants.
const (
	algEd25519     = 0x01
	algCosignature = 0x04
)

// CosignatureKeyHash is the C2SP tlog-cosignature key ID of an Ed25519
// cosigner: SHA-256(name || "\n" || 0x04 || pub)[:4], big-endian.
func CosignatureKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', algCosignature})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil)[:4])
}

// CosignedMessage returns the bytes a cosignature/v1 signature covers:
//
//	"cosignature/v1\ntime <timestamp>\n" || checkpoint body
//
// with timestamp in decimal seconds since the Unix epoch.
func CosignedMessage(timestamp uint64, text []byte) []byte {
	b := make([]byte, 0, 64+len(text))
	b = append(b, "cosignature/v1\ntime "...)
	b = strconv.AppendUint(b, timestamp, 10)
	b = append(b, '\n')
	return append(b, text...)
}

// NewCosignatureVerifierKey returns the C2SP vkey of a witness:
// "<name>+<8 hex key ID>+<base64(0x04 || pub)>".
func NewCosignatureVerifierKey(name string, pub ed25519.PublicKey) (string, error) {
	if !validOrigin(name) || len(pub) != ed25519.PublicKeySize {
		return "", errors.New("invalid cosigner name or key")
	}
	return fmt.Sprintf("%s+%08x+%s", name, CosignatureKeyHash(name, pub),
		base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, pub...))), nil
}

// A Cosigner is a note.Signer producing C2SP tlog-cosignature/v1
// signatures: 8-byte big-endian timestamp || Ed25519 signature over
// CosignedMessage. Pass it to note.Sign to add a witness cosignature.
type Cosigner struct {
	name string
	priv ed25519.PrivateKey
	hash uint32
	now  func() time.Time
}

var _ note.Signer = (*Cosigner)(nil)

// NewCosigner returns a cosigner; now is the clock (time.Now if nil).
func NewCosigner(name string, priv ed25519.PrivateKey, now func() time.Time) (*Cosigner, error) {
	if !validOrigin(name) || len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("invalid cosigner name or key")
	}
	if now == nil {
		now = time.Now
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &Cosigner{name: name, priv: priv, hash: CosignatureKeyHash(name, pub), now: now}, nil
}

func (c *Cosigner) Name() string    { return c.name }
func (c *Cosigner) KeyHash() uint32 { return c.hash }
func (c *Cosigner) Sign(msg []byte) ([]byte, error) {
	ts := uint64(c.now().Unix())
	sig := ed25519.Sign(c.priv, CosignedMessage(ts, msg))
	return append(binary.BigEndian.AppendUint64(nil, ts), sig...), nil
}

// cosigVerifier verifies cosignature/v1 signatures (or, for an algorithm 0x01
// vkey, plain note signatures over the checkpoint body). It is immutable and
// safe for concurrent use.
type cosigVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	alg  byte
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.hash }
func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if v.alg == algEd25519 {
		return ed25519.Verify(v.pub, msg, sig)
	}
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig)
	return ed25519.Verify(v.pub, CosignedMessage(ts, msg), sig[8:])
}

// NewWitnessVerifier returns a note.Verifier for a witness vkey as in
// trust.json: a C2SP cosignature/v1 key (algorithm 0x04; the signature is
// an 8-byte timestamp and an Ed25519 signature over [CosignedMessage]) or a
// plain note Ed25519 key (0x01). It is safe for concurrent use.
func NewWitnessVerifier(vkey string) (note.Verifier, error) {
	return parseWitnessKey(vkey)
}

// parseWitnessKey parses a witness vkey: a C2SP cosignature/v1 key (algorithm
// 0x04) or a plain note Ed25519 key (algorithm 0x01).
func parseWitnessKey(vkey string) (*cosigVerifier, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	h16, k64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validOrigin(name) || !isLowerHex(strings.ToLower(h16), 8) || len(h16) != 8 {
		return nil, errors.New("malformed vkey")
	}
	hash, err := strconv.ParseUint(h16, 16, 32)
	if err != nil {
		return nil, errors.New("malformed vkey hash")
	}
	key, err := base64.StdEncoding.Strict().DecodeString(k64)
	if err != nil || len(key) != 1+ed25519.PublicKeySize {
		return nil, errors.New("malformed vkey key")
	}
	v := &cosigVerifier{name: name, hash: uint32(hash), pub: ed25519.PublicKey(key[1:]), alg: key[0]}
	switch key[0] {
	case algCosignature:
		if CosignatureKeyHash(name, v.pub) != v.hash {
			return nil, errors.New("vkey hash does not match key")
		}
	case algEd25519:
		if _, err := note.NewVerifier(vkey); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unsupported vkey algorithm %#x", key[0])
	}
	return v, nil
}
