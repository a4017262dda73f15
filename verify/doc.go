// Package verify defines the wire formats of custody's signer — records,
// checkpoints, bundles and trust.json — and verifies an exported run bundle
// offline.
//
// It is the only public package of custody and has no server dependencies:
// the standard library, golang.org/x/mod/sumdb/tlog (RFC 6962 hashes and
// proofs) and golang.org/x/mod/sumdb/note (C2SP signed notes). The signer
// writes with the same helpers the verifier reads with ([SignRecord],
// [CanonicalRecord], [LeafHash], [ChainHash], [CommitArgs],
// [FormatCheckpoint], [NewCosigner], [Bundle.Marshal], [Trust.Marshal]).
//
// The contract of [Verify]: trust comes only from trust.json ([ParseTrust]).
// Keys listed in a bundle and cosignatures by witnesses not in trust.json
// count for nothing. A bundle verifies only if every record of the run from
// run_seq 0 to its last record is present, in order, chained, signed by a
// trusted unretired log key, and included in a checkpoint signed by a trusted
// log key and validly cosigned by a quorum of trusted witnesses (an invalid
// cosignature counts for nothing and refuses nothing). [Verify] returns a
// [Result] whose String is exactly "VERIFIED" (the run ends with run.closing)
// or "VERIFIED TO HEAD n (open)" (n is the run_seq of the last record), or a
// [*VerificationError] naming the first check that failed, with evidence, and
// wrapping one sentinel (ErrSequence, ErrChain, …) that wraps [ErrRefused];
// some carry typed evidence ([*WitnessQuorumError]: the valid and the
// invalid cosigners; [*RetiredKeyError]: the retired keys that alone signed
// the checkpoint), found with errors.As.
// It never panics on malformed input.
//
// A command-line verifier should print Result.String or the error and exit
// with [ExitCode]: 0 verified, 1 refused, 2 usage, 3 invalid trust.json,
// 4 unreadable input.
//
// What verification cannot show: a bundle whose tail was cut off and which
// does not claim to be closed verifies as open at the shorter head (a reader
// who needs the whole run must require VERIFIED); a signer that holds the log
// key and colludes with a quorum of witnesses can fork the log; a bundle
// that leaves out a key.retired record (K lines are what the exporter
// included, not proven to be all) does not retire that key, so a key
// retirement that must hold belongs in trust.json ("retired_from_index").
//
// # Format
//
// Canonical JSON. Records, and the JSON that an args commitment covers, are
// RFC 8785 (JCS) canonical JSON. Numbers are IEEE-754 doubles written as
// ECMAScript writes them: shortest round-trip digits, plain decimal for
// magnitudes in [1e-6, 1e21) ("1", "0.5", "9007199254740992"), exponent form
// otherwise ("1e+21", "1e-7"). A number whose canonical form would denote
// another decimal value (more precision or range than a double holds, e.g.
// 9007199254740993 or 1e400) is refused rather than rounded, and so is a
// written minus zero (RFC 8785 erratum 7920), so two different argument
// texts never share a commitment. So is a number beyond ±2^53 that it, or
// its canonical form, writes as an integer the double is not exactly
// (1152921504606847000 is the canonical form of 2^60 =
// 1152921504606846976; 100000000000000000000000 becomes 1e+23), which
// readers that keep integers exact (Python) and readers of doubles
// (JavaScript) would read as different values. Integers within ±(2^53-1) canonicalize as
// they did when only integers were accepted. Members are sorted by UTF-16
// code units; strings escape only '"', '\' and control characters (\b \t
// \n \f \r, else \u00xx lowercase); no whitespace. Parsers reject duplicate
// member names, lone surrogates (raw or escaped, e.g. "\ud800"), invalid
// UTF-8, the numbers above (NaN and Infinity are not JSON), nesting deeper
// than 64 and trailing data ([ErrMalformedJSON] with [ErrDuplicateKey],
// [ErrNumber], [ErrSurrogate] or [ErrUTF8]); records must also be
// byte-for-byte canonical ([ErrNotCanonical]).
//
// Record. One JSON object with exactly these members (v1):
//
//	v         integer, 1
//	log       the log's origin (1–255 printable ASCII bytes, no space or '+')
//	index     integer, the record's leaf index in the log, from 0
//	run       run id, 1–128 bytes of [A-Za-z0-9._:-], not starting with "_"; "_log" for log-level records
//	run_seq   integer, position in its run, from 0, no gaps
//	prev      "" when run_seq is 0, else ChainHash of the run's previous record:
//	          lowercase hex SHA-256 of its canonical bytes including sig
//	type      [a-z0-9._]{1,64}: run.registered, call.decided,
//	          approval.requested, approval.consumed, call.completed,
//	          model.event, run.closing, key.retired, log.rollback_detected, …
//	time      RFC 3339 UTC with milliseconds, "2026-11-25T10:00:01.500Z"
//	body      object, type-specific (see below)
//	key_id    8 lowercase hex digits, [KeyID] of the signing key
//	sig       standard padded base64 of the 64-byte Ed25519 signature
//
// A record never stores a call's arguments, only body "args_commitment" =
// [CommitArgs](salt, canonicalArgs) = lowercase hex SHA-256 of
// "custody-args-v1" 0x00 || salt (32 random bytes, fresh per record) ||
// JCS(args). Revealing the salt (base64) and the arguments later opens that
// one record's commitment ([VerifyArgsReveal]). A body may carry
// "policy_hash" = [PolicyHash] of the policy file that decided; the bundle
// must then include that snapshot. Bodies the verifier reads: run.closing has
// "reason" (e.g. "idle_timeout"); key.retired has "key_id" and
// "retired_from_index"; model.call has "tool_uses" ([{name, id?,
// args_commitment?}]), "tool_uses_dropped", "response_malformed", "method"
// and "response_id" (the provider's id of the response, for an API that can
// retrieve it again); run.reconciled has its counts, "unreported" and,
// when not 0, "repeated_count" and "repeated" ([{index, pos, tool,
// of_index, of_pos}]: uses a retrieve, method GET, carried again, each
// with the use of the same response_id and id it repeats, counted once).
// What is checked of them is in Verify's reconciliation.
//
// run.closing is the last record of its run. Calls refused after a run closed,
// key retirements and rollback events are records of the reserved run "_log".
//
// Example record (one line):
//
//	{"body":{"reason":"idle_timeout"},"index":6,"key_id":"1dde4531","log":"signer.custody.example/log","prev":"4f1c…(64 hex)","run":"run-a","run_seq":4,"sig":"base64…","time":"2026-11-25T10:00:10.500Z","type":"run.closing","v":1}
//
// Signature. sig is Ed25519 by a log key over [SignedMessage]:
//
//	"custody-record-v1" 0x00 log 0x00 index 0x00 run 0x00 run_seq 0x00 prev 0x00 JCS(record without "sig")
//
// with index and run_seq in decimal. The message binds the log, the leaf
// index, the run, the position in the run and the previous record. It always
// contains a NUL byte, which a signed note's text never does, so the same key
// signs checkpoints without ambiguity.
//
// Keys. A log key is an Ed25519 key with a note name (the origin, by
// convention). Its key id is the note key hash, SHA-256(name || "\n" || 0x01
// || public key)[:4], as 8 lowercase hex digits: [KeyID], the same value as
// the hash field of its note verifier key "name+hash+base64(0x01||key)".
// Rotation: the new key signs a key.retired record (run "_log") with body
// {"key_id": old, "retired_from_index": i}; from then on a record signed by
// the old key at index >= i, or a checkpoint of size > i signed only by it,
// is refused. trust.json may state the same with "retired_from_index".
//
// Log. Records are the leaves of one RFC 6962 Merkle tree; a record's leaf
// hash is [LeafHash] = tlog.RecordHash(canonical record bytes including sig)
// = SHA-256(0x00 || bytes). Inclusion proofs are tlog.RecordProof (RFC 6962
// Merkle audit path), accepted exactly when tlog.CheckRecord accepts them.
//
// Checkpoint. A C2SP signed note whose text is a C2SP tlog-checkpoint body
// ([FormatCheckpoint]):
//
//	<origin>\n<tree size, decimal>\n<base64 root hash>\n[<extension line>\n…]
//
// signed by a log key (note signature: "— <name> base64(key hash || Ed25519
// signature)") and cosigned by witnesses per C2SP tlog-cosignature/v1: the
// witness's key id is SHA-256(name || "\n" || 0x04 || public key)[:4]; the
// signature bytes are an 8-byte big-endian Unix timestamp || Ed25519 over
// "cosignature/v1\ntime <timestamp>\n" || checkpoint body ([CosignedMessage],
// [NewCosigner]). Example:
//
//	signer.custody.example/log
//	8
//	CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=
//
//	— signer.custody.example/log Hd5FMW…
//	— w1.example jWbPPwAAAABkGFDL…
//
// The tree size is at most 2^62 ([MaxTreeSize]): x/mod's tlog proof checks
// do not return for larger trees.
//
// Bundle. A text container ([Bundle.Marshal], [ParseBundle]); lines end in
// "\n":
//
//	custody-bundle-v1
//	<header: one line of JSON>
//	R\t<canonical record>[\t<base64 proof hash>…]     one per record of the run, run_seq order
//	K\t<canonical record>[\t<base64 proof hash>…]     key.retired records (run "_log"), index order
//	<empty line>
//	<signed checkpoint note, verbatim, to the end>
//
// Canonical records contain no raw tab or newline, so no escaping is needed.
// Every proof is against the bundled checkpoint's tree. The header:
//
//	{"v":1,"run":"run-a","closed":true,
//	 "keys":[{"key_id":"1dde4531","public_key":"base64"}],      informational only
//	 "policies":[{"hash":"<hex sha256>","snapshot":"<base64 policy file>"}]}
//
// "closed" is a claim: a bundle that claims closed must end with run.closing.
//
// trust.json ([Trust], [ParseTrust]):
//
//	{"version": 1,
//	 "log": {"origin": "signer.custody.example/log",
//	         "keys": [{"key_id": "1dde4531",
//	                   "public_key": "<base64 Ed25519 key>",
//	                   "note_verifier": "signer.custody.example/log+1dde4531+AT…",
//	                   "retired_from_index": 1000}]},               optional
//	 "witnesses": [{"name": "w1.example", "vkey": "w1.example+8f3c…+BA…"}],
//	 "witness_quorum": 1}
//
// key_id and public_key must match note_verifier. Witness vkeys are C2SP
// cosignature/v1 keys (algorithm 0x04, as [NewCosignatureVerifierKey]
// writes); a plain note Ed25519 key (0x01, signature over the checkpoint body
// alone) is accepted too. witness_quorum distinct trusted witnesses must
// cosign the checkpoint; 0 means none are required (development only).
// Signatures do not cover the signer's name, so a public key may belong to
// one witness name only and to no log key: trust.json that shares one is
// invalid.
package verify
