/**
 * Shapes of the memory API (`/v1/memory/{tenant}/{agent}/...`), as custody
 * sends them: member names are the wire's, times are RFC 3339 strings,
 * state values are parsed JSON.
 *
 * @module
 */

import type { CallOptions } from "./session.js";

/** Any JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [k: string]: JSONValue };

/** One remembered item. */
export interface Memory {
  id: string;
  /** e.g. `"preference"`, `"fact"`. */
  kind: string;
  /** Set for a keyed memory (a new value supersedes the old one). */
  key?: string;
  text: string;
  tags?: string[];
  /** The pod (session) that remembered it. */
  session: string;
  /** RFC 3339. */
  created_at: string;
  /** The ID of the memory that replaced this one (history only). */
  superseded_by?: string;
  /** RFC 3339 (history only). */
  superseded_at?: string;
}

/**
 * The outcome of {@link Client.remember}. `status` is `"created"`,
 * `"unchanged"` (the same memory was already stored) or `"superseded"` (a
 * keyed memory replaced its old value; `supersedes` is the old ID).
 */
export interface Remembered {
  id: string;
  status: "created" | "unchanged" | "superseded";
  memory: Memory;
  supersedes?: string;
}

/** Options of {@link Client.remember}. */
export interface RememberOptions extends CallOptions {
  /** A key: a keyed memory supersedes its previous value. Default none. */
  key?: string | undefined;
  /** Tags. Default none. */
  tags?: string[] | undefined;
}

/**
 * Options of {@link Client.recall}. Unset means no kind filter, custody's
 * default limit (10), and active memories only.
 */
export interface RecallOptions extends CallOptions {
  kind?: string | undefined;
  /** At most this many memories (1 to custody's maximum). */
  limit?: number | undefined;
  /** Include superseded memories. Default false. */
  history?: boolean | undefined;
}

/** The holder of a state slot's lease, as {@link State} reports it. */
export interface LeaseHolder {
  epoch: number;
  /** The holding session (pod name). */
  holder: string;
  /** RFC 3339. */
  expires_at: string;
}

/** A working-state slot. */
export interface State {
  name: string;
  /** 0 before the first write; +1 on every write. */
  version: number;
  /** The value (`null` before the first write). */
  state: JSONValue;
  /** RFC 3339; absent before the first write. */
  updated_at?: string;
  updated_by?: string;
  /** The current lease, if one is held. */
  lease?: LeaseHolder;
}

/**
 * A working-state lease: `epoch` fences writes ({@link Client.putState}),
 * `version` and `state` are the slot's current value to resume from.
 */
export interface Lease {
  name: string;
  epoch: number;
  /** RFC 3339. */
  expires_at: string;
  version: number;
  state: JSONValue;
}

/** Options of {@link Client.acquireLease}. */
export interface LeaseOptions extends CallOptions {
  /**
   * The lease's lifetime in seconds, rounded up to whole seconds (under a
   * second asks for 1 s); unset or 0: custody's default (5 minutes unless
   * configured). Negative, NaN or infinite is a RangeError.
   */
  ttlSeconds?: number | undefined;
}
