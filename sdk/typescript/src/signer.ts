/**
 * Shapes of the signer API (`/v1/signer/runs/...`), as custody sends them:
 * member names are the wire's, times are RFC 3339 strings.
 *
 * @module
 */

import type { JSONValue } from "./memory.js";

/** The arguments of a tool call: a JSON object. */
export type Args = { [k: string]: JSONValue };

/** A signer run as custody reports it. */
export interface Run {
  run: string;
  tenant: string;
  agent: string;
  session: string;
  closed: boolean;
  /** e.g. `"closed"`, `"idle_timeout"`; absent while open. */
  closed_reason?: string;
  /** Records signed in the run so far. */
  records: number;
  /** RFC 3339; absent before the first call. */
  last_activity?: string;
  pending_approvals: number;
}

/**
 * The signer's decision on one tool call. `effect` is `"allow"`, `"deny"`
 * or `"ask"`; `rule_ids` lists every matching rule (built-in rules first);
 * `index` and `run_seq` locate the signed `call.decided` record.
 */
export interface Decision {
  call_id: string;
  effect: "allow" | "deny" | "ask";
  rule_ids: string[];
  policy_hash: string;
  /** Rule id -> evaluation error, for rules that failed to evaluate. */
  errors?: Record<string, string>;
  /** Salted commitment to the args (the args themselves are not logged). */
  args_commitment: string;
  /** Leaf index in the log. */
  index: number;
  /** Sequence number within the run. */
  run_seq: number;
}

/** Locates a record the signer appended. */
export interface Appended {
  /** Leaf index in the log. */
  index: number;
  /** Sequence number within the run. */
  run_seq: number;
}

/** Metadata about one model call (never its prompt or output). */
export interface ModelEvent {
  /** e.g. `"request"`, `"response"`. */
  event: string;
  provider?: string;
  model?: string;
  request_id?: string;
  stop_reason?: string;
  input_tokens?: number;
  output_tokens?: number;
}

/**
 * An approval request; `state` is `"pending"`, `"approved"`, `"denied"`,
 * `"consumed"` or `"expired"`.
 */
export interface Approval {
  approval_id: string;
  run: string;
  call_id: string;
  tool: string;
  state: "pending" | "approved" | "denied" | "consumed" | "expired";
  args_commitment: string;
  /** RFC 3339. */
  expires_at: string;
  /** Leaf index of the record this call appended, if it appended one. */
  index?: number;
}
