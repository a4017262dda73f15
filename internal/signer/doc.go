// Package signer is custody's signer service: it decides each agent tool
// call by policy and writes a signed, append-only record of every call and
// decision that can be exported as a bundle and verified offline with the
// public verify package (whose doc states the record, checkpoint, bundle
// and trust.json formats this package writes).
//
// # Log
//
// Records are the leaves of one RFC 6962 Merkle tree kept in a [Store]
// (leaves plus golang.org/x/mod/sumdb/tlog stored hashes). Every append goes
// through one group committer: it takes up to Options.MaxBatch queued
// calls, checks and signs them in queue order (so the records of a run form
// one linear chain however many calls race), writes them in one write
// transaction, and acknowledges each caller only after the commit is
// durable. Records are signed with the log's current Ed25519 note key
// (Options.KeyFile, created if missing, until the first rotation).
// [Signer.RotateKey] (admin POST /v1/signer/keys/rotate) makes a new key,
// kept in Options.KeyFile + "." + key id (mode 0600; old keys are kept),
// and appends a key.retired record to "_log", signed by the new key, with
// retired_from_index = its own index + 1; later records and checkpoints
// are signed by the new key, and the chain of key.retired records decides
// the current key after a restart. [Signer.Trust] lists every key (retired
// ones with retired_from_index) and bundles carry the key.retired records.
// Checkpoints (C2SP signed notes)
// are signed every Options.CheckpointInterval when the tree grew, at every
// run close, on Export when needed and on Close, sent to Options.Witnesses
// and stored with their cosignatures. A witness holding a larger tree than
// the signer (a restored backup) makes the signer record
// log.rollback_detected in the run "_log" and refuse writes (503
// log_rollback) until [Signer.AcknowledgeRollback]. So does a witness's
// fork answer (log.fork_detected): it has cosigned a tree of the same size
// with another root (409), or the consistency proof from the tree it
// cosigned to this log's does not verify (422) — a restored log that
// regrew, or a log that showed two histories.
//
// One signer writes a log: its records sign index, run_seq and prev from
// state it keeps in memory. A store refuses a batch that does not extend
// what it holds ([ErrLogConflict]: a second replica appended to the same
// database); the signer then logs the conflict at Error and refuses every
// write (503 log_conflict) and every new checkpoint until it is restarted
// and reloads the log, never re-signing on top of the other writer's
// records. On PostgreSQL, replicas take the store's writer lease before
// starting the signer, so only one appends at a time.
//
// # Agent API
//
// [Signer.Handler] serves, behind apikey's Middleware; only the run's own
// tenant and agent may use a run (403 forbidden otherwise):
//
//	POST /v1/signer/runs                                 201 RunInfo
//	POST /v1/signer/runs/{run}/decide          {call_id, tool, args}         200 DecideResponse
//	POST /v1/signer/runs/{run}/complete        {call_id, outcome, result?}   200 {index, run_seq}
//	POST /v1/signer/runs/{run}/model-events    {event, provider?, model?, request_id?, stop_reason?, input_tokens?, output_tokens?}  200 {index, run_seq}
//	POST /v1/signer/runs/{run}/close                                          200 {index, run_seq}
//	GET  /v1/signer/runs/{run}/status                                         200 RunInfo
//	POST /v1/signer/runs/{run}/approvals       {call_id, tool, args}         201 ApprovalInfo
//	GET  /v1/signer/runs/{run}/approvals/{id}?wait=30s                       200 ApprovalInfo
//	POST /v1/signer/runs/{run}/approvals/{id}/consume  {args}                200 ApprovalInfo
//
// Errors are {"error": code, "message": text}: 400 bad_request, 401
// unauthenticated, 403 forbidden, 404 not_found, 409 run_closed (the call
// was recorded as call.refused in "_log"), 409 duplicate_call, 409 not_ask,
// approval_pending, approval_denied, approval_consumed, args_mismatch, 410
// approval_expired (each approval refusal is recorded as approval.refused),
// 503 log_rollback, log_conflict or unavailable. [Signer.AdminHandler]
// serves the operator API.
//
// # Records written
//
//	run.registered     {identity: {method, service_account, tenant, agent, session, pod_uid, sandbox, sandbox_uid, claim_uid, attested}, isolation: "remote"}
//	call.decided       {call_id, tool, args_commitment, effect, rule_ids, policy_hash, default?}
//	call.completed     {call_id, outcome, result_commitment?}
//	model.event        {event, provider?, model?, request_id?, stop_reason?, input_tokens?, output_tokens?}
//	approval.requested {approval_id, call_id, tool, args_commitment, expires_at}
//	approval.resolved  {approval_id, call_id, decision: approve|deny}
//	approval.consumed  {approval_id, call_id, args_commitment}
//	approval.refused   {approval_id?, call_id, reason, args_commitment?}
//	model.call         {provider, model?, path_class, method, status, outcome, stream?, started, duration_ms,
//	                    first_byte_ms?, input_tokens?, output_tokens?, stop_reason?, token_id,
//	                    request_commitment, response_commitment, tool_uses: [{name, id?, args_commitment|malformed|truncated}],
//	                    tool_uses_dropped?, response_malformed?, response_id?}
//	run.reconciled     {model_calls, tool_uses, decided_calls, unreported_count, unreported: [{index, pos, tool}], unreadable_responses,
//	                    repeated_count?, repeated?: [{index, pos, tool, of_index, of_pos}]}
//	run.closing        {reason: closed|idle_timeout}
//	call.refused       (run "_log") {run, operation, reason: "run_closed", tenant, agent, session}
//	log.rollback_detected (run "_log") {witness_size, log_size}
//	log.fork_detected  (run "_log") {witness, witness_size, log_size, log_root}
//	key.retired        (run "_log") {key_id, retired_from_index}
//	model.call.refused (run "_log") {run, tenant, agent, reason: unknown_run|run_closed|forbidden, ...model.call} or {reason: invalid, inbox_id}
//
// # Model calls
//
// The gateway of every replica hands the model calls made with a run's
// gateway token to the store's inbox ([InboxWriter]); the signer drains
// it every Options.InboxInterval and before any close ([Signer.DrainInbox])
// and writes each as model.call in its run. Before a run closes, its
// gateway tokens are revoked (Options.RevokeRunTokens; a failure keeps
// the run open), the inbox drained, and, if the run recorded model
// calls, run.reconciled written: the tool uses the model requested that
// no decision of the run matched by tool name and canonical arguments
// (digests kept beside the log, never in a record), and the responses
// that could not be read for tool uses. verify checks it offline.
//
// A response the provider can hand out again (OpenAI Responses: GET
// /v1/responses/{id}, streamed, resumed with starting_after, or not) is
// named by model.call response_id, and a use a retrieve (method GET)
// carries again — the same provider, response_id, use id, tool and
// canonical arguments — is counted once: each such use counts as often
// as creating calls carried it, at least once, and a retrieve's use
// beyond that is listed in run.reconciled repeated (with the use it
// repeats) instead of being matched. A use of the same response, use id
// and tool whose arguments could not be read (a stream cut in them and
// resumed) repeats the one whose arguments were. A retrieve thus never
// cancels a use, and a use only a retrieve carried counts.
//
// Args are never stored: a record carries verify.CommitArgs over a fresh
// 32-byte salt, which the signer keeps ([Signer.RevealSalt]) so one
// record's commitment can be opened later. A completion's result (any
// JSON, e.g. the MCP proxy's tools/call result) is committed the same
// way, as result_commitment with its own salt, and never stored. policy_hash is verify.PolicyHash
// of the tenant's policy file ("<PolicyDir>/<tenant>.yaml", re-read when it
// changes), whose snapshot is stored and bundled.
package signer
