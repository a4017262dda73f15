package signer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/verify"
)

// Witness is a C2SP tlog-witness client: it sends a signed checkpoint with a
// consistency proof from oldSize (the size the witness last cosigned; 0 and
// an empty proof for a witness that holds nothing) and returns the
// witness's cosignature lines ("— name base64\n"…). It must be safe for
// concurrent use. When the witness holds another size than oldSize it
// returns an error from which [Options.WitnessSize] extracts that size; a
// fork answer is an error [Options.WitnessFork] recognizes.
type Witness interface {
	AddCheckpoint(ctx context.Context, oldSize int64, proof tlog.TreeProof, signed []byte) ([]byte, error)
}

// Options configure a [Signer]. Zero values take the documented defaults.
type Options struct {
	// Store persists the log; required.
	Store Store
	// KeyFile is the path of the log's note signing key
	// ("PRIVATE+KEY+<origin>+…"); created with mode 0600 if missing
	// (unless Shared). Required.
	KeyFile string
	// Shared says several processes run this signer on one store in turn
	// (replicas taking over a writer lease). The key must then come from
	// outside, the same on every replica: a missing KeyFile is an error,
	// not a new key, and [Signer.RotateKey] is refused (a rotated key
	// would exist only on the replica that made it).
	Shared bool
	// Origin is the log's origin (checkpoint first line and key name).
	// Default "custody.local/log". An existing key of another name is an
	// error.
	Origin string
	// Engine decides calls. Default policy.New(policy.Options{}) (built-in
	// rules, default effect deny).
	Engine *policy.Engine
	// PolicyDir holds one policy file per tenant, "<dir>/<tenant>.yaml",
	// re-read when its size or modification time changes. Empty, or a
	// missing file: the tenant has no rules of its own.
	PolicyDir string
	// IdleTimeout closes a run with no calls for this long (run.closing
	// reason idle_timeout); the clock is paused while an approval is
	// pending. Default 1h (idle_s 3600).
	IdleTimeout time.Duration
	// MaxOpenRuns is how many open runs one agent (tenant and agent) may
	// hold at once; Register refuses another with ErrTooManyRuns (HTTP
	// 429) until one closes (or idles out). Default 64.
	MaxOpenRuns int
	// IdleCheckInterval is how often idle runs are looked for. Default
	// IdleTimeout/10, at most 10s.
	IdleCheckInterval time.Duration
	// ApprovalTTL is how long an approval can be approved and consumed
	// after it was requested (its expires_at). Default 1h; between
	// MinApprovalTTL and MaxApprovalTTL (custody serve --approval-ttl).
	ApprovalTTL time.Duration
	// CheckpointInterval is how often a checkpoint is signed when the tree
	// grew. Default 10s. Checkpoints are also signed at every run close,
	// on Export when needed, and on Close.
	CheckpointInterval time.Duration
	// Witnesses get every new checkpoint; their cosignatures are kept with
	// it if they verify with a key of TrustedWitnesses (C2SP
	// tlog-cosignature: the witness's vkey); any other cosignature line is
	// dropped, logged and reported to OnBadCosignature, so that one
	// misbehaving witness cannot spoil the checkpoints the others cosign.
	// A witness that holds a larger tree than the signer makes the signer
	// record log.rollback_detected and refuse writes.
	Witnesses []Witness
	// WitnessSize extracts the tree size a witness reports holding from
	// its AddCheckpoint error (a C2SP tlog-witness 409 Conflict). Default:
	// errors.As to an error with a method WitnessTreeSize() int64.
	WitnessSize func(error) (int64, bool)
	// WitnessFork reports whether a witness's AddCheckpoint error is a
	// fork answer: it has cosigned a tree of the checkpoint's size with
	// another root (C2SP tlog-witness 409 without a size), or the
	// consistency proof from the tree it cosigned does not verify (422).
	// The signer then records log.fork_detected and refuses writes as for
	// a rollback. Default: errors.As to an error with a method
	// WitnessFork() bool that returns true.
	WitnessFork func(error) bool
	// TrustedWitnesses and WitnessQuorum go into [Signer.Trust].
	// TrustedWitnesses are also the keys the Witnesses' cosignatures are
	// verified with on receipt; an invalid vkey is an error of New.
	TrustedWitnesses []verify.TrustedWitness
	WitnessQuorum    int
	// OnBadCosignature, if set, is called with the index in Witnesses of
	// a witness that answered a cosignature line that does not verify
	// (bad signature, unknown key, malformed), once per line, from the
	// goroutine signing the checkpoint. For a metric; nil: none.
	OnBadCosignature func(witness int)
	// OnCommit, if set, is called after each group commit the store
	// accepted, on the commit goroutine (so it must not block), with the
	// number of records the batch appended (0 for a batch of approvals or
	// metadata only) and how long the store's AppendBatch took. Each call
	// is one durable transaction: one fsync on SQLite.
	OnCommit func(records int, took time.Duration)
	// InboxInterval is how often the model-call inbox is drained
	// ([Signer.DrainInbox]). Default 250ms.
	InboxInterval time.Duration
	// FlushInbox, if set, is called before a run is closed, ahead of the
	// drain: it writes what this process's own gateway has queued (an
	// InboxWriter's Flush), so that a model call this replica served just
	// before the close is in the run. Calls queued on other replicas'
	// gateways reach the inbox within their InboxWriter's interval; one
	// that arrives after the close is recorded as model.call.refused
	// (run_closed) in "_log". A FlushInbox error is logged, not fatal.
	FlushInbox func(ctx context.Context) error
	// RevokeRunTokens, if set, revokes the gateway tokens minted for a run
	// of tenant and agent (gateway.RevokeRun). It is called before the run
	// closes (by its agent or the idle closer), so that no process of the
	// run goes on calling the model after its record ends; if it fails,
	// the run is not closed (CloseRun returns the error; the idle closer
	// tries again next time).
	RevokeRunTokens func(ctx context.Context, tenant, agent, run string) error
	// MaxBatch is the most appends one group commit writes. Default 128.
	// A batch is sealed when the commit before it ends, so under load
	// one batch is signed while the one before commits and batches
	// rarely reach the cap (52-57 records per commit at 128 clients);
	// serveload on 2 cores did 5,020-5,077 decides/s at 128 clients with
	// 128 against 4,472-4,953 with 64, in the same runs.
	MaxBatch int
	// CommitWindow is the longest a batch waits, once the commit
	// goroutine is free, for the callers the previous commit acknowledged
	// to come back (as many as it acknowledged), so that concurrent
	// callers share one commit rather than alternating between two half
	// batches. A batch waits only while fewer have come back than were
	// acknowledged: a lone caller, or callers that do not come back
	// quickly, commit at once or after at most this. Default 500µs;
	// negative: never wait.
	CommitWindow time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Log receives the signer's logs. Default slog.Default().
	Log *slog.Logger
}

// DefaultOrigin is the log's origin unless configured.
const DefaultOrigin = "custody.local/log"

// WitnessSizeError is what the default [Options.WitnessSize] looks for.
type WitnessSizeError interface {
	error
	WitnessTreeSize() int64
}

func defaultWitnessFork(err error) bool {
	var e interface{ WitnessFork() bool }
	return errors.As(err, &e) && e.WitnessFork()
}

func defaultWitnessSize(err error) (int64, bool) {
	var e WitnessSizeError
	if errors.As(err, &e) {
		return e.WitnessTreeSize(), true
	}
	return 0, false
}

// Signer is the signer service. It is safe for concurrent use.
type Signer struct {
	opts    Options
	store   Store
	log     *slog.Logger
	engine  *policy.Engine
	baseKey *logKey // Options.KeyFile

	reqs     chan *appendReq
	stop     chan struct{}
	loopDone chan struct{}
	bgWG     sync.WaitGroup
	closeMu  sync.Once
	failed   chan struct{} // closed once the signer refuses writes for good (see Failed)
	failOnce sync.Once
	qmu      sync.RWMutex // held shared while queueing; exclusively to stop queueing
	drainMu  sync.Mutex   // one DrainInbox at a time
	stopping bool

	mu       sync.Mutex // guards the fields below, and runs' contents
	size     int64
	hashes   map[int64]tlog.Hash // tlog frontier and the new hashes of the batch being built
	head     treeHead            // committed tree
	gen      uint64              // state generation: bumped by each reload after a failed commit
	runs     map[string]*runState
	rollback bool
	// halt is, while rollback, the type of the _log record that set it
	// (log.rollback_detected or log.fork_detected).
	halt     string
	conflict bool // the store refused a batch with ErrLogConflict: writes refused until restart
	closed   bool
	keys     []*logKey // oldest first; the last one signs new records
	keyRecs  []Leaf    // the key.retired records, index order
	// committedKeys is how many of keys are committed: a rotation built
	// into a batch that has not committed yet (the pipeline) adds a key
	// that checkpoints, trust.json and bundles must not use until it has.
	committedKeys int
	// failure is the error of the last failed commit, given (wrapped) to
	// the callers of batches built on it.
	failure error

	cpMu   sync.Mutex // serializes checkpoints; guards wsize
	wsize  []int64
	pols   policyCache
	logRun *runState
	// witnessKeys verify the cosignatures witnesses return (from
	// Options.TrustedWitnesses); immutable.
	witnessKeys note.Verifiers
}

type treeHead struct {
	size int64
	root tlog.Hash
}

type runState struct {
	row          RunRow
	seq          int64  // next run_seq
	prev         string // ChainHash of the last record
	lastActivity time.Time
	closed       bool
	calls        map[string]*callState
	approvals    map[string]*approval
	recon        reconState
}

type callState struct {
	row  CallRow
	salt []byte
}

type approval struct {
	row     ApprovalRow
	salt    []byte
	changed chan struct{} // closed and replaced on every state change
}

// Bounds of Options.ApprovalTTL. An approval pauses its run's idle clock
// while pending, so a week bounds how long a forgotten one keeps a run
// open; under a second it could not be approved by a person.
const (
	MinApprovalTTL = time.Second
	MaxApprovalTTL = 7 * 24 * time.Hour
)

// New opens the signer: it loads or creates the key, loads the log state,
// syncs with the witnesses (detecting a rollback), and starts the group
// committer, the idle closer and the periodic checkpointer. Close stops
// them. Invalid options (a negative duration, an approval TTL out of
// bounds) are an error.
func New(ctx context.Context, opts Options) (*Signer, error) {
	if opts.Store == nil || opts.KeyFile == "" {
		return nil, errors.New("signer: Store and KeyFile are required")
	}
	if opts.IdleTimeout < 0 || opts.ApprovalTTL < 0 || opts.CheckpointInterval < 0 || opts.MaxBatch < 0 || opts.IdleCheckInterval < 0 {
		return nil, errors.New("signer: negative option")
	}
	if opts.Origin == "" {
		opts.Origin = DefaultOrigin
	}
	if opts.MaxOpenRuns <= 0 {
		opts.MaxOpenRuns = 64
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = time.Hour
	}
	if opts.IdleCheckInterval == 0 {
		opts.IdleCheckInterval = min(opts.IdleTimeout/10, 10*time.Second)
	}
	if opts.ApprovalTTL == 0 {
		opts.ApprovalTTL = time.Hour
	}
	if opts.ApprovalTTL < MinApprovalTTL || opts.ApprovalTTL > MaxApprovalTTL {
		return nil, fmt.Errorf("signer: approval TTL %v is not between %v and %v", opts.ApprovalTTL, MinApprovalTTL, MaxApprovalTTL)
	}
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = 10 * time.Second
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 128
	}
	if opts.CommitWindow == 0 {
		opts.CommitWindow = 500 * time.Microsecond
	}
	if opts.InboxInterval <= 0 {
		opts.InboxInterval = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.WitnessSize == nil {
		opts.WitnessSize = defaultWitnessSize
	}
	if opts.WitnessFork == nil {
		opts.WitnessFork = defaultWitnessFork
	}
	opts.Witnesses = append([]Witness(nil), opts.Witnesses...)
	opts.TrustedWitnesses = append([]verify.TrustedWitness(nil), opts.TrustedWitnesses...)
	wkeys := make([]note.Verifier, 0, len(opts.TrustedWitnesses))
	for _, tw := range opts.TrustedWitnesses {
		v, err := verify.NewWitnessVerifier(tw.VKey)
		if err != nil {
			return nil, fmt.Errorf("signer: trusted witness %q: %w", tw.Name, err)
		}
		wkeys = append(wkeys, v)
	}
	if opts.Engine == nil {
		e, err := policy.New(policy.Options{Log: opts.Log})
		if err != nil {
			return nil, fmt.Errorf("signer: %w", err)
		}
		opts.Engine = e
	}
	s := &Signer{
		opts: opts, store: opts.Store, engine: opts.Engine,
		log:      opts.Log.With("service", "signer"),
		reqs:     make(chan *appendReq, 4096),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		failed:   make(chan struct{}),
		wsize:    make([]int64, len(opts.Witnesses)),
		pols:     policyCache{dir: opts.PolicyDir, entries: map[string]*policyEntry{}},
	}
	s.witnessKeys = note.VerifierList(wkeys...)
	if err := s.loadKey(); err != nil {
		return nil, err
	}
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	go s.appendLoop()
	switch {
	case len(opts.Witnesses) == 0:
	case s.head.size > 0:
		if _, err := s.Checkpoint(ctx); err != nil && !errors.Is(err, ErrLogRollback) {
			s.log.WarnContext(ctx, "start-up checkpoint failed", "err", err)
		}
	default:
		if err := s.probeWitnesses(ctx); err != nil && !errors.Is(err, ErrLogRollback) {
			s.log.WarnContext(ctx, "start-up witness probe failed", "err", err)
		}
	}
	s.bgWG.Add(3)
	go s.idleLoop()
	go s.checkpointLoop()
	go s.inboxLoop()
	return s, nil
}

const metaRollback = "rollback"

// load (re)builds the in-memory state from the store: the tree size and
// frontier, the open runs with their calls and approvals, and "_log".
// Callers hold s.mu or are New.
func (s *Signer) load(ctx context.Context) error {
	size, err := s.store.TreeSize(ctx)
	if err != nil {
		return fmt.Errorf("signer: load: %w", err)
	}
	s.size = size
	s.hashes = map[int64]tlog.Hash{}
	idx := frontier(size)
	hs, err := s.store.ReadHashes(ctx, idx)
	if err != nil {
		return fmt.Errorf("signer: load frontier: %w", err)
	}
	for i, x := range idx {
		s.hashes[x] = hs[i]
	}
	root, err := tlog.TreeHash(size, s.memReader())
	if err != nil {
		return fmt.Errorf("signer: load tree hash: %w", err)
	}
	s.head = treeHead{size, root}
	if err := s.loadKeys(ctx); err != nil {
		return err
	}
	if err := s.checkKeySignsLog(ctx); err != nil {
		return err
	}
	// A detected rollback is stored (meta "rollback", non-empty until
	// acknowledged), so a reload or restart keeps refusing writes.
	switch v, err := s.store.Meta(ctx, metaRollback); {
	case err == nil:
		s.rollback, s.halt = v != "", ""
		if s.rollback {
			s.halt = verify.TypeRollbackDetected // what a value without "type" was
			var m struct {
				Type string `json:"type"`
			}
			if json.Unmarshal([]byte(v), &m) == nil && m.Type != "" {
				s.halt = m.Type
			}
		}
	case errors.Is(err, ErrNotFound):
		s.rollback, s.halt = false, ""
	default:
		return fmt.Errorf("signer: %w", err)
	}
	s.runs = map[string]*runState{}
	s.logRun = &runState{row: RunRow{ID: verify.LogRun}}
	if err := s.loadChain(ctx, s.logRun); err != nil {
		return err
	}
	rows, err := s.store.OpenRuns(ctx)
	if err != nil {
		return fmt.Errorf("signer: load: %w", err)
	}
	for _, row := range rows {
		rs := &runState{row: row, calls: map[string]*callState{}, approvals: map[string]*approval{}}
		if err := s.loadChain(ctx, rs); err != nil {
			return err
		}
		calls, err := s.store.Calls(ctx, row.ID)
		if err != nil {
			return fmt.Errorf("signer: load: %w", err)
		}
		for _, c := range calls {
			salt, err := s.store.Salt(ctx, c.Index)
			if err != nil {
				return fmt.Errorf("signer: load salt %d: %w", c.Index, err)
			}
			rs.calls[c.CallID] = &callState{row: c, salt: salt}
		}
		aps, err := s.store.Approvals(ctx, row.ID)
		if err != nil {
			return fmt.Errorf("signer: load: %w", err)
		}
		for _, a := range aps {
			salt, err := s.store.Salt(ctx, a.Index)
			if err != nil {
				return fmt.Errorf("signer: load salt %d: %w", a.Index, err)
			}
			rs.approvals[a.ID] = &approval{row: a, salt: salt, changed: make(chan struct{})}
		}
		if err := s.loadRecon(ctx, rs); err != nil {
			return err
		}
		s.runs[row.ID] = rs
	}
	return nil
}

// loadChain sets rs's next run_seq, prev and last activity from its last
// record.
func (s *Signer) loadChain(ctx context.Context, rs *runState) error {
	l, err := s.store.LastLeaf(ctx, rs.row.ID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signer: load run %s: %w", rs.row.ID, err)
	}
	rec, err := verify.ParseRecord(l.Record)
	if err != nil {
		return fmt.Errorf("signer: load run %s: %w", rs.row.ID, err)
	}
	rs.seq = l.RunSeq + 1
	rs.prev = verify.ChainHash(l.Record)
	rs.lastActivity = rec.Time
	return nil
}

// frontier returns the tlog storage indexes of the roots of the perfect
// subtrees that make up a tree of size n: what tlog.TreeHash(n) and
// tlog.StoredHashes(n, …) read. At most log₂ n indexes.
func frontier(n int64) []int64 {
	var idx []int64
	var start int64
	for l := 62; l >= 0; l-- {
		if n&(1<<l) != 0 {
			idx = append(idx, tlog.StoredHashIndex(l, start>>l))
			start += 1 << l
		}
	}
	return idx
}

// memReader reads s.hashes, falling back to the store.
func (s *Signer) memReader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		var miss []int64
		for i, x := range idx {
			h, ok := s.hashes[x]
			if !ok {
				miss = append(miss, x)
				continue
			}
			out[i] = h
		}
		if len(miss) > 0 {
			hs, err := s.store.ReadHashes(context.Background(), miss)
			if err != nil {
				return nil, err
			}
			j := 0
			for i, x := range idx {
				if _, ok := s.hashes[x]; !ok {
					out[i] = hs[j]
					j++
				}
			}
		}
		return out, nil
	})
}

// storeReader reads committed hashes from the store.
func (s *Signer) storeReader(ctx context.Context) tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		return s.store.ReadHashes(ctx, idx)
	})
}

// Close stops the background goroutines, commits what is queued, signs a
// final checkpoint and returns. It does not close the Store.
func (s *Signer) Close() error {
	var err error
	s.closeMu.Do(func() {
		s.qmu.Lock()
		s.stopping = true
		s.qmu.Unlock()
		close(s.stop)
		s.bgWG.Wait()
		<-s.loopDone
		if _, cerr := s.Checkpoint(context.Background()); cerr != nil && !errors.Is(cerr, ErrLogRollback) && !errors.Is(cerr, ErrNotFound) && !errors.Is(cerr, ErrLogConflict) {
			err = cerr
		}
	})
	return err
}

// Failed returns a channel closed once this signer refuses every write
// until it is replaced: another writer appended to the log
// ([ErrLogConflict]), or a failed commit could not be followed by a reload
// of the state. A process running it under a writer lease should then
// stop it and release the lease, so that a fresh signer (here or on
// another replica) loads the log again.
func (s *Signer) Failed() <-chan struct{} { return s.failed }

func (s *Signer) fail() { s.failOnce.Do(func() { close(s.failed) }) }

// Trust returns trust.json for this log: its origin, every key it has
// signed with (a retired key with its retired_from_index), the trusted
// witnesses and the quorum.
func (s *Signer) Trust() verify.Trust {
	s.mu.Lock()
	chain := s.committedChain()
	keys := make([]verify.TrustKey, 0, len(chain))
	for i, lk := range chain {
		k, err := verify.NewTrustKey(lk.vkey)
		if err != nil {
			panic(err) // lk.vkey was made by note.NewEd25519VerifierKey
		}
		if lk.retired >= 0 && i < len(chain)-1 {
			from := lk.retired
			k.RetiredFromIndex = &from
		}
		keys = append(keys, k)
	}
	s.mu.Unlock()
	return verify.Trust{
		Version:       verify.TrustVersion,
		Log:           verify.TrustLog{Origin: s.opts.Origin, Keys: keys},
		Witnesses:     append([]verify.TrustedWitness{}, s.opts.TrustedWitnesses...),
		WitnessQuorum: s.opts.WitnessQuorum,
	}
}

// VerifierKey is the current log key's note verifier key (the key of
// the last committed rotation).
func (s *Signer) VerifierKey() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committedKey().vkey
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newSalt() []byte {
	b := make([]byte, verify.ArgsSaltSize)
	rand.Read(b)
	return b
}
