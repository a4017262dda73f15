package signer

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// Store persists the signer's log and the state beside it. The
// implementations are internal/store/sqlite and internal/store/postgres;
// internal/store/storetest.Signer checks this contract.
//
// Consistency: [Store.AppendBatch] is the only write to the log and runs,
// calls, salts and approvals; it commits all of a batch or nothing in one
// write transaction, and returns only once the transaction is durable. The
// signer calls it from one goroutine at a time. Reads may run concurrently
// with it and see either all of a batch or none of it. Lookups of a missing
// row return [ErrNotFound] (wrapped or not).
//
// Single writer: the signer signs each record's index, run_seq and prev
// from state it keeps in memory, so a second writer on the same store
// (another process on the SQLite file, another replica on the PostgreSQL
// database) would fork the log. AppendBatch therefore checks, in its
// transaction and serialized with every other AppendBatch on the store,
// that the batch extends the stored log ([Batch.Extends]) and refuses it
// with an error wrapping [ErrLogConflict], committing nothing, if not.
type Store interface {
	// AppendBatch commits b atomically and durably. It returns an error
	// wrapping ErrLogConflict, and commits nothing, when b does not extend
	// the stored log.
	AppendBatch(ctx context.Context, b *Batch) error
	// ReadHashes returns the tlog stored hashes at the given storage
	// indexes (tlog.StoredHashIndex), in order. It is a tlog.HashReader.
	ReadHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error)
	// TreeSize is the number of leaves.
	TreeSize(ctx context.Context) (int64, error)
	// RunLeaves returns a run's leaves in run_seq order.
	RunLeaves(ctx context.Context, run string) ([]Leaf, error)
	// LastLeaf returns a run's leaf with the highest run_seq.
	LastLeaf(ctx context.Context, run string) (Leaf, error)
	// Run returns one run.
	Run(ctx context.Context, id string) (RunRow, error)
	// OpenRuns returns the runs without a closing reason.
	OpenRuns(ctx context.Context) ([]RunRow, error)
	// Calls returns a run's decided calls.
	Calls(ctx context.Context, run string) ([]CallRow, error)
	// Approvals returns every approval of a run.
	Approvals(ctx context.Context, run string) ([]ApprovalRow, error)
	// Approval returns one approval.
	Approval(ctx context.Context, id string) (ApprovalRow, error)
	// Salt returns the args salt of the record at a leaf index.
	Salt(ctx context.Context, index int64) ([]byte, error)
	// PutCheckpoint stores a signed checkpoint note for a tree size,
	// replacing the note stored for that size (to add cosignatures).
	PutCheckpoint(ctx context.Context, c CheckpointRow) error
	// LatestCheckpoint returns the checkpoint of the largest tree size.
	LatestCheckpoint(ctx context.Context) (CheckpointRow, error)
	// PutPolicy stores a policy snapshot by its hash (idempotent).
	PutPolicy(ctx context.Context, hash string, snapshot []byte) error
	// Policy returns a policy snapshot by hash.
	Policy(ctx context.Context, hash string) ([]byte, error)
	// Meta returns a value set with [Batch.Meta].
	Meta(ctx context.Context, name string) (string, error)
	// ArgDigests returns a run's argument digests ([Batch.Digests]) in
	// leaf index and position order.
	ArgDigests(ctx context.Context, run string) ([]ArgDigest, error)
	// Inbox returns up to limit entries of the model-call inbox, oldest
	// first ([InboxStore.PutInbox] adds them, [Batch.InboxDone] removes
	// them).
	Inbox(ctx context.Context, limit int) ([]InboxEntry, error)
}

// InboxStore is the write side of the model-call inbox: what a gateway on
// any replica sharing the store uses to hand the signer the model calls it
// observed ([InboxWriter]). Entries are opaque JSON ([ModelCall]); one
// PutInbox is one transaction. Both stores implement it.
type InboxStore interface {
	PutInbox(ctx context.Context, entries [][]byte) error
}

// InboxEntry is one pending inbox entry: its id (ascending in insertion
// order) and its data, the JSON of a [ModelCall].
type InboxEntry struct {
	ID   int64
	Data []byte
}

// Argument digest kinds.
const (
	DigestDecided   = "decided"    // the args of a call.decided record
	DigestRequested = "requested"  // the args of a tool use in a model.call record
	DigestModelCall = "model_call" // a model.call record itself (Pos: its tool uses dropped; Tool "response_malformed" if its response could not be read; no digest)
	DigestUseKey    = "use_key"    // what identifies a tool use of a model.call record that names its response, beside its requested row (Pos: its position; Tool "retrieve" or "create"; Digest: useKeyOf)
)

// ArgDigest is the SHA-256 of one call's or tool use's canonical
// arguments, kept beside the log (never in a record) so that the run's
// reconciliation can match what the model asked for with what was
// decided. Digest is nil for a tool use whose arguments could not be
// read (malformed or over the bound): it matches by tool name only.
type ArgDigest struct {
	Run    string
	Index  int64 // leaf index of the record
	Pos    int   // position of the tool use in a model.call record; for DigestModelCall the uses it dropped; 0 for a decision
	Kind   string
	Tool   string
	Digest []byte
}

// Leaf is one record of the log.
type Leaf struct {
	Index  int64  // leaf index (RFC 6962 leaf number), from 0, no gaps
	Run    string // run id, or verify.LogRun
	RunSeq int64  // position in the run, from 0, no gaps
	Type   string // record type
	Record []byte // canonical signed record (verify.CanonicalRecord)
}

// IndexedHash is one tlog stored hash at its storage index.
type IndexedHash struct {
	Index int64
	Hash  tlog.Hash
}

// Salt is the args salt of the record at a leaf index, kept so that the
// record's args commitment can be opened later.
type Salt struct {
	Index int64
	Salt  []byte
}

// RunRow is a registered run. Identity is the JSON of the identity the
// run.registered record carries.
type RunRow struct {
	ID           string
	Tenant       string
	Agent        string
	Session      string
	Identity     []byte
	CreatedAt    time.Time
	ClosedReason string // "" while open
}

// RunClose closes a run.
type RunClose struct {
	ID     string
	Reason string
}

// CallRow is a decided call.
type CallRow struct {
	Run        string
	CallID     string
	Tool       string
	Effect     string
	Index      int64  // leaf index of its call.decided record
	Commitment string // the record's args_commitment
}

// Approval states.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalConsumed = "consumed"
)

// ApprovalRow is an approval request and its state.
type ApprovalRow struct {
	ID         string
	Run        string
	CallID     string
	Tool       string
	Index      int64  // leaf index of its approval.requested record
	Commitment string // args commitment of the approval.requested record
	CreatedAt  time.Time
	ExpiresAt  time.Time
	State      string    // ApprovalPending, …
	ResolvedAt time.Time // zero while pending
}

// CheckpointRow is a signed checkpoint note with any cosignatures.
type CheckpointRow struct {
	Size      int64
	Note      []byte
	CreatedAt time.Time
}

// Batch is what one group commit writes.
type Batch struct {
	Leaves     []Leaf
	Hashes     []IndexedHash
	Salts      []Salt
	NewRuns    []RunRow
	ClosedRuns []RunClose
	Calls      []CallRow     // inserted
	Approvals  []ApprovalRow // inserted or replaced by ID
	Meta       map[string]string
	Digests    []ArgDigest // inserted
	InboxDone  []int64     // inbox entry ids deleted (recorded by this batch)
}

func (b *Batch) reset() {
	*b = Batch{
		Leaves: b.Leaves[:0], Hashes: b.Hashes[:0], Salts: b.Salts[:0],
		NewRuns: b.NewRuns[:0], ClosedRuns: b.ClosedRuns[:0], Calls: b.Calls[:0], Approvals: b.Approvals[:0],
		Digests: b.Digests[:0], InboxDone: b.InboxDone[:0],
	}
}

// LeafRuns returns the distinct runs of b's leaves, in order of first
// appearance: the runs whose stored heads [Batch.Extends] needs.
func (b *Batch) LeafRuns() []string {
	seen := make(map[string]bool, 8)
	var out []string
	for i := range b.Leaves {
		if r := b.Leaves[i].Run; !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// Extends checks that b's leaves extend a stored log of size leaves whose
// runs end at heads (run -> highest stored run_seq; a run absent from
// heads has no leaves yet): leaf i of b must have index size+i, and each
// run's leaves must have consecutive run_seq starting at its head+1 (0 for
// a new run); and each argument digest must be of a leaf of b in the
// digest's run (the SQLite store finds a run's digests through its
// leaves). Otherwise it returns an error wrapping [ErrLogConflict] that
// names the first leaf or digest that does not. A batch without leaves or
// digests extends any log. Stores call it inside AppendBatch's transaction after locking out
// other writers.
func (b *Batch) Extends(size int64, heads map[string]int64) error {
	next := make(map[string]int64, len(heads))
	for i := range b.Leaves {
		l := &b.Leaves[i]
		if want := size + int64(i); l.Index != want {
			return fmt.Errorf("%w: leaf %d of the batch has index %d, the stored log has %d leaves before it",
				ErrLogConflict, i, l.Index, want)
		}
		want, ok := next[l.Run]
		if !ok {
			want = 0
			if h, ok := heads[l.Run]; ok {
				want = h + 1
			}
		}
		if l.RunSeq != want {
			return fmt.Errorf("%w: leaf %d of run %q has run_seq %d, want %d", ErrLogConflict, l.Index, l.Run, l.RunSeq, want)
		}
		next[l.Run] = want + 1
	}
	for i := range b.Digests {
		a := &b.Digests[i]
		if j := a.Index - size; j < 0 || j >= int64(len(b.Leaves)) || b.Leaves[j].Run != a.Run {
			return fmt.Errorf("%w: argument digest %d (leaf %d, run %q) is not of a leaf of that run in the batch", ErrLogConflict, i, a.Index, a.Run)
		}
	}
	return nil
}
