/**
 * The identity exchange and authenticated calls: a {@link Session} holds
 * the current key, exchanges the token file's token for a new one before
 * it expires, and re-exchanges once when custody refuses a key that looked
 * live. The key is kept in memory only.
 *
 * @module
 */

import { readFile } from "node:fs/promises";

import { type Config, type ResolvedConfig, resolveConfig } from "./config.js";
import { ConfigError, CustodyError, TransportError } from "./errors.js";
import { Transport } from "./transport.js";

/**
 * An exchanged key and the identity it speaks for, as
 * `POST /v1/auth/{method}` answers.
 */
export interface Key {
  /** The bearer key (`ck_…`): a secret. */
  key: string;
  /** The key's ID (hex SHA-256), for the admin listener's revoke route. */
  key_id: string;
  /** Expiry, RFC 3339 (15 minutes after the exchange by default). */
  expires_at: string;
  /** The sandbox's namespace. */
  tenant: string;
  /** The SandboxClaim's name (stable across pods). */
  agent: string;
  /** The pod's name. */
  session: string;
}

/** Per-call options every method takes. */
export interface CallOptions {
  /** Aborts the call (a {@link TransportError} is thrown). */
  signal?: AbortSignal | undefined;
}

/** One authenticated request; `path(key)` gives the path for that key. */
export interface AuthedRequest extends CallOptions {
  method: string;
  path: (k: Key) => string;
  /** JSON request body, already serialized. */
  body?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** Overrides the configured timeout for this request, in ms. */
  timeoutMs?: number | undefined;
}

/**
 * The key holder. Safe for concurrent use: concurrent calls that find no
 * live key share one exchange.
 */
export class Session {
  protected readonly cfg: ResolvedConfig;
  protected readonly http: Transport;
  #key: Key | undefined;
  #expiresMs = 0;
  #pending: Promise<Key> | undefined;

  /**
   * Validates cfg; reads the CA file, if any. Does not exchange yet.
   *
   * @throws {ConfigError} see {@link resolveConfig} and {@link Transport}.
   */
  constructor(cfg: Config) {
    this.cfg = resolveConfig(cfg);
    this.http = new Transport({ url: this.cfg.url, caFile: this.cfg.caFile, timeoutMs: this.cfg.timeoutMs });
  }

  /**
   * Exchanges the token file's current token for a new key
   * (`POST /v1/auth/{method}` `{"token"}`) and keeps it.
   *
   * @throws {ConfigError} the token file cannot be read.
   * @throws {Unauthorized} the token was refused (`unauthenticated`,
   *   `warm_pool`, `not_claimed`).
   * @throws {RateLimited} too many exchanges (`rate_limited`, see `retryAfter`).
   */
  async exchange(opts: CallOptions = {}): Promise<Key> {
    let token: string;
    try {
      token = (await readFile(this.cfg.tokenFile, "utf8")).trim();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? "error";
      throw new ConfigError(`custody: read token file ${this.cfg.tokenFile}: ${code}`, { cause: e });
    }
    const res = await this.http.request({
      method: "POST",
      path: `/v1/auth/${this.cfg.method}`,
      body: JSON.stringify({ token }),
      signal: opts.signal,
    });
    const k = parseJSON(res.body, "exchange") as Key;
    const exp = Date.parse(k.expires_at);
    if (typeof k.key !== "string" || !k.key || Number.isNaN(exp)) {
      throw new CustodyError("custody: exchange: response has no key or no valid expires_at");
    }
    this.#key = k;
    this.#expiresMs = exp;
    return k;
  }

  /**
   * Returns a live key, exchanging if there is none or it expires within
   * `refreshBeforeMs`.
   *
   * @throws see {@link Session.exchange}.
   */
  async currentKey(opts: CallOptions = {}): Promise<Key> {
    const k = this.#key;
    if (k && this.cfg.now() + this.cfg.refreshBeforeMs < this.#expiresMs) {
      return k;
    }
    if (!this.#pending) {
      // Shared by every caller, so no caller's signal aborts it (the
      // timeout bounds it); each caller stops waiting on its own abort.
      this.#pending = this.exchange().finally(() => {
        this.#pending = undefined;
      });
    }
    return untilAborted(this.#pending, opts.signal);
  }

  /**
   * Revokes the current key, if any (`POST /v1/auth/revoke`), and forgets
   * it. The next call exchanges again.
   *
   * @throws {Unauthorized} the key was no longer live.
   */
  async revoke(opts: CallOptions = {}): Promise<void> {
    const k = this.#key;
    this.#key = undefined;
    this.#expiresMs = 0;
    if (!k) return;
    await this.http.request({ method: "POST", path: "/v1/auth/revoke", bearer: k.key, signal: opts.signal });
  }

  /** Closes idle connections (they do not keep the process alive anyway). */
  close(): void {
    this.http.close();
  }

  /**
   * Sends an authenticated request and returns the parsed JSON body
   * (`undefined` for an empty one). A 401 with a key that looked live
   * (revoked, or custody lost its cache) triggers one re-exchange and
   * retry.
   */
  protected async authed(req: AuthedRequest): Promise<unknown> {
    let k = await this.currentKey(req);
    const send = (key: Key) =>
      this.http.request({
        method: req.method,
        path: req.path(key),
        body: req.body,
        headers: req.headers,
        bearer: key.key,
        signal: req.signal,
        timeoutMs: req.timeoutMs,
      });
    let res;
    try {
      res = await send(k);
    } catch (e) {
      if (!(e instanceof CustodyError) || e.status !== 401) throw e;
      k = await this.exchange(req);
      res = await send(k);
    }
    return res.body === "" ? undefined : parseJSON(res.body, req.method);
  }

  /**
   * A signer call: {@link Session.authed}, retried while custody answers
   * 503 `signer_standby` (which it does before recording anything), after
   * each `Retry-After` (at least 100 ms) for up to `standbyWaitMs`.
   */
  protected async signerCall(req: AuthedRequest): Promise<unknown> {
    const deadline = this.cfg.now() + this.cfg.standbyWaitMs;
    for (;;) {
      try {
        return await this.authed(req);
      } catch (e) {
        if (!(e instanceof CustodyError) || e.status !== 503 || e.code !== "signer_standby") throw e;
        const pauseMs = Math.max((e.retryAfter ?? 0) * 1000, 100);
        if (this.cfg.standbyWaitMs < 0 || this.cfg.now() + pauseMs > deadline) throw e;
        if (!(await sleep(pauseMs, req.signal))) throw e;
      }
    }
  }
}

/** p, or a TransportError as soon as signal aborts. */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(new TransportError("custody: exchange: aborted", { cause: signal.reason }));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new TransportError("custody: exchange: aborted", { cause: signal.reason }));
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/** Resolves true after ms, or false as soon as signal aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function parseJSON(body: string, what: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    // No cause: the parser's message quotes the body, which may hold a key.
    throw new CustodyError(`custody: ${what}: decode response: not JSON`);
  }
}
