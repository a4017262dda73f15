/**
 * The client an agent inside a sandbox uses to reach custody: it exchanges
 * the pod's projected service-account token for a short-lived key,
 * re-exchanges when the key nears expiry or is refused, and calls the
 * memory API in the agent's own namespace and the signer (runs, decisions,
 * approvals). It mirrors the Go package `client`.
 *
 * @module
 */

import { type Config, configFromEnv } from "./config.js";
import type {
  JSONValue,
  Lease,
  LeaseOptions,
  Memory,
  RecallOptions,
  Remembered,
  RememberOptions,
  State,
} from "./memory.js";
import { type AuthedRequest, type CallOptions, type Key, Session } from "./session.js";
import type { Appended, Approval, Args, Decision, ModelEvent, Run } from "./signer.js";

/** Options of {@link Client.waitApproval}. */
export interface WaitOptions extends CallOptions {
  /**
   * Wait up to this many whole seconds (custody caps it at 60) while the
   * approval is pending; unset or 0: answer at once.
   */
  waitSeconds?: number | undefined;
}

const esc = encodeURIComponent;

/**
 * Talks to custody. Safe for concurrent use. Every method takes an
 * optional last argument with an `AbortSignal`; every error is a
 * {@link CustodyError} (see errors.ts for the subclasses).
 *
 * ```ts
 * const c = Client.fromEnv();
 * await c.remember("preference", "answers in French", { key: "language" });
 * ```
 */
export class Client extends Session {
  /**
   * A client configured from `CUSTODY_URL`, `CUSTODY_TOKEN_FILE`,
   * `CUSTODY_AUTH` and `CUSTODY_CA_FILE` in env (default `process.env`);
   * `overrides` set the other {@link Config} fields.
   *
   * @throws {ConfigError} a variable is missing or invalid, or the CA file
   *   cannot be read.
   */
  static fromEnv(env?: Record<string, string | undefined>, overrides: Partial<Config> = {}): Client {
    return new Client({ ...configFromEnv(env), ...overrides });
  }

  /**
   * Creates a client; it does not exchange until the first call.
   *
   * @throws {ConfigError} see {@link Config}.
   */
  constructor(cfg: Config) {
    super(cfg);
  }

  // ---- memory: /v1/memory/{tenant}/{agent}/...

  /** An authenticated call in the key's own memory namespace. */
  #memory(method: string, path: string, opts: CallOptions, extra: Partial<AuthedRequest> = {}): Promise<unknown> {
    return this.authed({
      method,
      path: (k: Key) => `/v1/memory/${esc(k.tenant)}/${esc(k.agent)}${path}`,
      signal: opts.signal,
      ...extra,
    });
  }

  /**
   * Stores `text` of `kind` (e.g. `"preference"`, `"fact"`). Remembering
   * the same thing twice stores it once (`status: "unchanged"`); a keyed
   * memory supersedes its previous value (`"superseded"`).
   *
   * @throws {BadRequest} empty kind or text, or text over custody's limit (413 `too_large`).
   */
  async remember(kind: string, text: string, opts: RememberOptions = {}): Promise<Remembered> {
    const body: Record<string, unknown> = { kind, text };
    if (opts.key) body["key"] = opts.key;
    if (opts.tags && opts.tags.length > 0) body["tags"] = opts.tags;
    return (await this.#memory("POST", "/memories", opts, { body: JSON.stringify(body) })) as Remembered;
  }

  /**
   * Searches memories by keywords (an empty `q` lists the newest first).
   *
   * @throws {BadRequest} a limit out of range.
   */
  async recall(q = "", opts: RecallOptions = {}): Promise<Memory[]> {
    const v = new URLSearchParams();
    if (q) v.set("q", q);
    if (opts.kind) v.set("kind", opts.kind);
    if (opts.limit && opts.limit > 0) v.set("limit", String(Math.trunc(opts.limit)));
    if (opts.history) v.set("history", "true");
    const qs = v.toString();
    const out = (await this.#memory("GET", "/memories" + (qs ? "?" + qs : ""), opts)) as { memories?: Memory[] | null };
    return out?.memories ?? [];
  }

  /**
   * Deletes a memory by ID.
   *
   * @throws {NotFound} no such memory (`not_found`).
   */
  async forget(id: string, opts: CallOptions = {}): Promise<void> {
    await this.#memory("DELETE", `/memories/${esc(id)}`, opts);
  }

  /**
   * Reads a working-state slot.
   *
   * @throws {NotFound} a slot never leased or written (`not_found`).
   * @throws {BadRequest} a name outside `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`.
   */
  async getState(name: string, opts: CallOptions = {}): Promise<State> {
    return (await this.#memory("GET", `/state/${esc(name)}`, opts)) as State;
  }

  /**
   * Takes (or renews) the lease on a slot and returns it with the slot's
   * current state to resume from.
   *
   * @throws {Conflict} another live session holds it (409 `lease_held`;
   *   `details.holder`, `details.expires_at`).
   * @throws {RangeError} `ttlSeconds` is negative or not a finite number.
   */
  async acquireLease(name: string, opts: LeaseOptions = {}): Promise<Lease> {
    const ttl = opts.ttlSeconds ?? 0;
    if (!(ttl >= 0 && Number.isFinite(ttl))) {
      throw new RangeError("ttlSeconds must be a finite number of seconds, 0 or more");
    }
    // Rounded up: under a second asks for 1 s, not the default (0).
    const body = ttl > 0 ? JSON.stringify({ ttl_seconds: Math.ceil(ttl) }) : undefined;
    return (await this.#memory("POST", `/state/${esc(name)}/lease`, opts, { body })) as Lease;
  }

  /**
   * Writes `value` (any JSON value) under lease `epoch` if the slot is
   * still at `version` (0: never written). The fencing check happens on
   * the server in the same transaction as the write.
   *
   * @throws {Conflict} 409 `lease_lost` (the epoch is not the live lease's:
   *   acquire again), 412 `version_conflict` (`details.version` is the
   *   current one).
   */
  async putState(name: string, epoch: number, version: number, value: JSONValue, opts: CallOptions = {}): Promise<State> {
    const headers = { "Lease-Epoch": String(epoch), "If-Match": String(version) };
    return (await this.#memory("PUT", `/state/${esc(name)}`, opts, { body: JSON.stringify(value), headers })) as State;
  }

  /**
   * Gives up the lease held with `epoch`.
   *
   * @throws {Conflict} 409 `lease_lost`: not the live lease's epoch.
   */
  async releaseLease(name: string, epoch: number, opts: CallOptions = {}): Promise<void> {
    await this.#memory("DELETE", `/state/${esc(name)}/lease`, opts, { headers: { "Lease-Epoch": String(epoch) } });
  }

  // ---- signer: /v1/signer/runs/...

  /** A signer call (retried while custody answers 503 `signer_standby`). */
  #signer(method: string, path: string, opts: CallOptions, body?: unknown, timeoutMs?: number): Promise<unknown> {
    return this.signerCall({
      method,
      path: () => "/v1/signer/runs" + path,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: opts.signal,
      timeoutMs,
    });
  }

  /** Starts a run for this agent. */
  async registerRun(opts: CallOptions = {}): Promise<Run> {
    return (await this.#signer("POST", "", opts)) as Run;
  }

  /**
   * Asks whether `tool` may run with `args` (a JSON object; only a salted
   * commitment to it is logged). `callId` is unique within the run.
   *
   * @throws {Conflict} `run_closed`, `duplicate_call`.
   * @throws {Forbidden} the run is another agent's (`forbidden`).
   * @throws {NotFound} no such run.
   */
  async decide(run: string, callId: string, tool: string, args: Args, opts: CallOptions = {}): Promise<Decision> {
    return (await this.#signer("POST", `/${esc(run)}/decide`, opts, { call_id: callId, tool, args })) as Decision;
  }

  /** Records the outcome (`"ok"`, `"error"`, …; not the output) of a decided call. */
  async complete(run: string, callId: string, outcome: string, opts: CallOptions = {}): Promise<Appended> {
    return (await this.#signer("POST", `/${esc(run)}/complete`, opts, { call_id: callId, outcome })) as Appended;
  }

  /** Records metadata about one model call. */
  async recordModelEvent(run: string, ev: ModelEvent, opts: CallOptions = {}): Promise<Appended> {
    return (await this.#signer("POST", `/${esc(run)}/model-events`, opts, ev)) as Appended;
  }

  /**
   * Asks an operator to approve a call decided `"ask"`, bound to exactly
   * `tool` and `args`.
   *
   * @throws {Conflict} `not_ask`: the call was not decided ask with these args.
   */
  async requestApproval(run: string, callId: string, tool: string, args: Args, opts: CallOptions = {}): Promise<Approval> {
    return (await this.#signer("POST", `/${esc(run)}/approvals`, opts, { call_id: callId, tool, args })) as Approval;
  }

  /**
   * Reads an approval, waiting up to `waitSeconds` (custody caps it at 60)
   * while it is pending. The request's timeout is extended by the wait.
   */
  async waitApproval(run: string, id: string, opts: WaitOptions = {}): Promise<Approval> {
    const wait = opts.waitSeconds && opts.waitSeconds > 0 ? Math.trunc(opts.waitSeconds) : 0;
    const path = `/${esc(run)}/approvals/${esc(id)}` + (wait > 0 ? `?wait=${wait}` : "");
    const timeoutMs = wait > 0 ? this.cfg.timeoutMs + wait * 1000 : undefined;
    return (await this.#signer("GET", path, opts, undefined, timeoutMs)) as Approval;
  }

  /**
   * Uses an approved approval once, with exactly its args.
   *
   * @throws {Conflict} `approval_pending`, `approval_denied`,
   *   `approval_consumed`, `args_mismatch`; 410 `approval_expired`.
   */
  async consumeApproval(run: string, id: string, args: Args, opts: CallOptions = {}): Promise<Approval> {
    return (await this.#signer("POST", `/${esc(run)}/approvals/${esc(id)}/consume`, opts, { args })) as Approval;
  }

  /** Closes a run; later calls in it are refused (409 `run_closed`) and recorded. */
  async closeRun(run: string, opts: CallOptions = {}): Promise<Appended> {
    return (await this.#signer("POST", `/${esc(run)}/close`, opts)) as Appended;
  }

  /** Reads a run's state. */
  async runStatus(run: string, opts: CallOptions = {}): Promise<Run> {
    return (await this.#signer("GET", `/${esc(run)}/status`, opts)) as Run;
  }
}
