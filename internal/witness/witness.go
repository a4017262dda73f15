// Package witness is a C2SP tlog-witness (https://c2sp.org/tlog-witness):
// an outside party that cosigns a log's checkpoints after checking that each
// one is consistent with the last checkpoint it cosigned for that log, so a
// log that rolls back or forks is detected. It also holds the [Client] a log
// (custody's signer) uses to ask a witness for cosignatures.
//
// The contract of [Witness.AddCheckpoint]: the witness follows a fixed set
// of logs, each named by its checkpoint origin and trusted through one or
// more note verifier keys. For each log it stores only the latest tree it
// cosigned (size and RFC 6962 root hash, in a [Store]) and never moves it
// backwards: the check of the caller's old size against the stored size
// and the write of the new tree are one compare-and-swap, so of two racing
// requests from the same old size one wins and the other gets a conflict
// carrying the new size. It returns cosignatures only after the new tree is
// durable. A checkpoint of the stored size is cosigned again if its root is
// the stored root; with another root it is a fork, logged at Error with both
// roots and refused. A tree of size 0 is cosigned but never stored (it
// states nothing).
//
// Checks, in order, with the error returned and the HTTP status it maps to
// ([HTTPStatusFor]):
//
//	request or checkpoint does not parse           ErrMalformed     400
//	origin not followed                            ErrUnknownLog    404
//	no trusted log signature verifies              ErrBadSignature  403
//	old size > checkpoint size                     ErrMalformed     400
//	old size != stored size (0 if none)            *ConflictError   409, body "<stored size>\n",
//	                                                                Content-Type text/x.tlog.size
//	consistency proof from (old size, stored root)
//	to the checkpoint does not verify (tlog.CheckTree;
//	must be empty from size 0 or to the same size;
//	a tree of size 0 must have the RFC 6962
//	empty-tree hash as its root)                    ErrBadProof      422
//	same size, different root                      ErrFork          409
//
// Signatures by keys the witness does not know are ignored.
//
// # Format
//
// Request: POST <prefix>/add-checkpoint; the body is an old size line, zero
// to 63 consistency proof lines (one base64 hash each), an empty line and
// the signed checkpoint note ([verify.FormatCheckpoint] text plus note
// signature lines); every line ends in "\n":
//
//	old 8
//	PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=
//	jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=
//
//	signer.custody.example/log
//	13
//	CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=
//
//	— signer.custody.example/log Hd5FMW…
//
// Response 200: one note signature line per witness key, a C2SP
// tlog-cosignature/v1 over the checkpoint text ([verify.NewCosigner]: key
// hash || 8-byte big-endian Unix timestamp || Ed25519 signature over
// "cosignature/v1\ntime <timestamp>\n" || checkpoint text):
//
//	— w1.example jWbPPwAAAABkGFDL…
//
// Appended to the signed checkpoint, the lines make a note that verifies
// with the witness's vkey ([Witness.VerifierKey], algorithm 0x04).
package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/verify"
)

// Store persists the latest tree the witness cosigned per log. It must be
// safe for concurrent use, by several processes sharing it too.
type Store interface {
	// LatestTree returns the size and root hash of the latest tree stored
	// for origin, or size 0 and the zero hash if there is none.
	LatestTree(ctx context.Context, origin string) (size int64, root tlog.Hash, err error)
	// CompareAndSwapTree atomically, and durably before it returns, sets
	// origin's tree to (newSize, newRoot) if its stored size (0 if none)
	// is oldSize. Otherwise it changes nothing and returns a
	// [*ConflictError] with the stored size. newSize must be >= oldSize;
	// if they are equal and a tree is stored, newRoot must be its root,
	// else it returns an error wrapping [ErrFork].
	CompareAndSwapTree(ctx context.Context, origin string, oldSize, newSize int64, newRoot tlog.Hash) error
}

// LogConfig is one log the witness follows.
type LogConfig struct {
	// Origin is the log's checkpoint origin line, e.g.
	// "signer.custody.example/log".
	Origin string
	// VerifierKeys are the note verifier keys ("name+hash+base64") of the
	// log's checkpoint signing keys; a checkpoint needs a valid signature
	// by at least one. At least one is required.
	VerifierKeys []string
}

// Options configures a [Witness].
type Options struct {
	// Name is the witness's name, the key name in its cosignatures and
	// vkey, e.g. "w1.example". Required.
	Name string
	// Key is the witness's Ed25519 signing key. Required.
	Key ed25519.PrivateKey
	// Logs are the logs the witness follows. Entries with the same Origin
	// are merged. At least one is required.
	Logs []LogConfig
	// Store persists the latest cosigned tree per log. Required.
	Store Store
	// Log receives forks (Error), failed proofs (Warn) and cosignatures
	// (Debug). Nil discards.
	Log *slog.Logger
	// Now is the clock for cosignature timestamps. Nil means time.Now.
	Now func() time.Time
}

// Witness verifies and cosigns checkpoints. It is safe for concurrent use.
type Witness struct {
	name     string
	cosigner *verify.Cosigner
	vkey     string
	logs     map[string]note.Verifiers
	store    Store
	log      *slog.Logger
}

// New returns a witness, validating opts.
func New(opts Options) (*Witness, error) {
	if opts.Store == nil {
		return nil, errors.New("witness: a store is required")
	}
	cosigner, err := verify.NewCosigner(opts.Name, opts.Key, opts.Now)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	vkey, err := verify.NewCosignatureVerifierKey(opts.Name, opts.Key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	if len(opts.Logs) == 0 {
		return nil, errors.New("witness: at least one log is required")
	}
	keys := map[string][]note.Verifier{}
	for _, l := range opts.Logs {
		if _, err := verify.FormatCheckpoint(verify.Checkpoint{Origin: l.Origin}); err != nil {
			return nil, fmt.Errorf("witness: log origin %q: %w", l.Origin, err)
		}
		if len(l.VerifierKeys) == 0 {
			return nil, fmt.Errorf("witness: log %q has no verifier key", l.Origin)
		}
		for _, k := range l.VerifierKeys {
			v, err := note.NewVerifier(k)
			if err != nil {
				return nil, fmt.Errorf("witness: log %q: verifier key %q: %w", l.Origin, k, err)
			}
			keys[l.Origin] = append(keys[l.Origin], v)
		}
	}
	w := &Witness{
		name:     opts.Name,
		cosigner: cosigner,
		vkey:     vkey,
		logs:     make(map[string]note.Verifiers, len(keys)),
		store:    opts.Store,
		log:      opts.Log,
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.log = w.log.With("service", "witness", "witness", opts.Name)
	for origin, vs := range keys {
		w.logs[origin] = note.VerifierList(vs...)
	}
	return w, nil
}

// Name returns the witness's name.
func (w *Witness) Name() string { return w.name }

// VerifierKey returns the witness's C2SP cosignature/v1 vkey,
// "<name>+<8 hex key hash>+<base64(0x04 || public key)>", for trust.json.
func (w *Witness) VerifierKey() string { return w.vkey }

// AddCheckpoint checks signedCheckpoint (a signed note) and the consistency
// proof from oldSize, records the new tree and returns the witness's
// cosignature lines ("— <name> <base64>\n"). See the package doc for the
// checks and errors.
func (w *Witness) AddCheckpoint(ctx context.Context, oldSize int64, proof tlog.TreeProof, signedCheckpoint []byte) ([]byte, error) {
	if oldSize < 0 {
		return nil, fmt.Errorf("%w: negative old size", ErrMalformed)
	}
	split := bytes.LastIndex(signedCheckpoint, []byte("\n\n"))
	if split < 0 {
		return nil, fmt.Errorf("%w: checkpoint is not a signed note", ErrMalformed)
	}
	text := signedCheckpoint[:split+1]
	c, err := verify.ParseCheckpoint(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	verifiers, ok := w.logs[c.Origin]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownLog, c.Origin)
	}
	if _, err := note.Open(signedCheckpoint, verifiers); err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return nil, fmt.Errorf("%w: %w", ErrBadSignature, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if oldSize > c.TreeSize {
		return nil, fmt.Errorf("%w: old size %d exceeds checkpoint size %d", ErrMalformed, oldSize, c.TreeSize)
	}
	log := w.log.With("origin", c.Origin, "old_size", oldSize, "tree_size", c.TreeSize)

	size, root, err := w.store.LatestTree(ctx, c.Origin)
	if err != nil {
		return nil, fmt.Errorf("witness: read latest tree: %w", err)
	}
	if size != oldSize {
		return nil, &ConflictError{Size: size}
	}
	switch {
	case c.TreeSize == 0:
		if len(proof) != 0 || c.Root != verify.EmptyTreeHash() {
			return nil, fmt.Errorf("%w: a tree of size 0 has no proof and the RFC 6962 empty-tree hash as its root", ErrBadProof)
		}
	case oldSize == 0:
		if len(proof) != 0 {
			return nil, fmt.Errorf("%w: proof from size 0 must be empty", ErrBadProof)
		}
	case c.TreeSize == oldSize:
		if len(proof) != 0 {
			return nil, fmt.Errorf("%w: proof between equal sizes must be empty", ErrBadProof)
		}
		if c.Root != root {
			log.ErrorContext(ctx, "FORK DETECTED: log signed a checkpoint whose root differs from the one this witness cosigned at the same size",
				"cosigned_root", root.String(), "new_root", c.Root.String(), "checkpoint", string(signedCheckpoint))
			return nil, fmt.Errorf("%w: size %d", ErrFork, c.TreeSize)
		}
	default:
		if err := tlog.CheckTree(proof, c.TreeSize, c.Root, oldSize, root); err != nil {
			log.WarnContext(ctx, "consistency proof does not verify; possible log misbehaviour",
				"cosigned_root", root.String(), "proof_hashes", len(proof), "checkpoint", string(signedCheckpoint))
			return nil, fmt.Errorf("%w: %w", ErrBadProof, err)
		}
	}
	if c.TreeSize > 0 {
		if err := w.store.CompareAndSwapTree(ctx, c.Origin, oldSize, c.TreeSize, c.Root); err != nil {
			if errors.Is(err, ErrFork) {
				log.ErrorContext(ctx, "FORK DETECTED at store", "new_root", c.Root.String(), "checkpoint", string(signedCheckpoint))
			}
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrFork) {
				return nil, err
			}
			return nil, fmt.Errorf("witness: store tree: %w", err)
		}
	}
	signed, err := note.Sign(&note.Note{Text: string(text)}, w.cosigner)
	if err != nil {
		return nil, fmt.Errorf("witness: cosign: %w", err)
	}
	sigs := signed[len(text)+1:]
	log.DebugContext(ctx, "cosigned checkpoint", "root", c.Root.String(), "cosignature", strings.TrimSpace(string(sigs)))
	return sigs, nil
}

// CheckSwap is the rule of [Store.CompareAndSwapTree], for stores to
// apply inside their transaction to the stored tree (size 0 and the zero
// hash when none): it returns a [*ConflictError] when the stored size is
// not oldSize, an error wrapping [ErrFork] when the sizes are equal (and
// not 0) but the roots differ, and otherwise whether newSize/newRoot must
// be written (false when it is the stored tree already).
func CheckSwap(storedSize int64, storedRoot tlog.Hash, oldSize, newSize int64, newRoot tlog.Hash) (write bool, err error) {
	if storedSize != oldSize {
		return false, &ConflictError{Size: storedSize}
	}
	if storedSize == newSize && storedSize > 0 {
		if storedRoot != newRoot {
			return false, fmt.Errorf("%w: size %d", ErrFork, storedSize)
		}
		return false, nil
	}
	return true, nil
}
