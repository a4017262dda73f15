/**
 * Errors the custody client throws.
 *
 * Every error is a {@link CustodyError}. A refusal from custody carries the
 * HTTP status and custody's JSON error body:
 *
 * ```json
 * {"error": "<code>", "message": "<fixed text>", ...details}
 * ```
 *
 * `code` (custody's short snake_case code: `"lease_held"`,
 * `"version_conflict"`, `"signer_standby"`, ...) is what to branch on; the
 * subclass only groups codes by HTTP status:
 *
 * | class             | statuses                                                        |
 * |-------------------|-----------------------------------------------------------------|
 * | `BadRequest`      | 400, 413, 428 (the request itself is wrong)                     |
 * | `Unauthorized`    | 401 (token or key refused; `warm_pool` too)                     |
 * | `Forbidden`       | 403 (`namespace_mismatch`, `forbidden`)                         |
 * | `NotFound`        | 404                                                             |
 * | `Conflict`        | 409, 410, 412 (`lease_held`, `lease_lost`, `version_conflict`, `run_closed`, approval states) |
 * | `RateLimited`     | 429 (`retryAfter` says when to try again)                       |
 * | `Unavailable`     | 5xx (`signer_standby`, `unavailable`, ...)                      |
 * | `CustodyError`    | any other status >= 300                                         |
 * | `TransportError`  | no HTTP answer: connection refused, timeout, aborted            |
 * | `TLSError`        | the TLS handshake failed (untrusted certificate, name mismatch) |
 * | `ConfigError`     | the client is misconfigured (missing URL, unreadable file)      |
 *
 * No error's message or properties ever hold the key or the token:
 * custody's messages are fixed text, and the client never formats a
 * request header or body into an error.
 *
 * @module
 */

/** Fields of a {@link CustodyError}; all optional. */
export interface CustodyErrorInit {
  /** HTTP status; 0 (default) when there was no HTTP answer. */
  status?: number;
  /** custody's error code (the body's `"error"`); `""` if none. */
  code?: string;
  /** The body's `"message"`: fixed text chosen by custody. */
  serverMessage?: string;
  /** `Retry-After` in seconds; `undefined` when the answer had none. */
  retryAfter?: number;
  /** The error body's other members. */
  details?: Record<string, unknown>;
  /** The whole response body (at most 8 MiB), as text. */
  body?: string;
  /** The underlying error (a Node network or TLS error). */
  cause?: unknown;
}

/**
 * A refusal from custody (status >= 300), or, with status 0, a failure to
 * reach it or to configure the client.
 */
export class CustodyError extends Error {
  /** The HTTP status; 0 when there was no HTTP answer. */
  readonly status: number;
  /**
   * custody's error code from the body's `"error"` member; `""` when the
   * body was not a custody error body (a proxy's page, a wrong URL).
   */
  readonly code: string;
  /** The body's `"message"` (fixed text chosen by custody); `""` if none. */
  readonly serverMessage: string;
  /**
   * The response's `Retry-After` in whole seconds; `undefined` when it had
   * none (custody sends it with 429 and 503).
   */
  readonly retryAfter: number | undefined;
  /**
   * The error body's other members: e.g. `holder` and `expires_at` for
   * 409 `lease_held`, `version` for 412 `version_conflict`, `limit_bytes`
   * for 413.
   */
  readonly details: Record<string, unknown>;
  /** The whole response body as text (at most 8 MiB); `""` if none. */
  readonly body: string;

  constructor(message: string, init: CustodyErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status ?? 0;
    this.code = init.code ?? "";
    this.serverMessage = init.serverMessage ?? "";
    this.retryAfter = init.retryAfter;
    this.details = { ...(init.details ?? {}) };
    this.body = init.body ?? "";
  }
}

/** 400, 413 or 428: custody found the request malformed or too large. */
export class BadRequest extends CustodyError {}
/** 401: the token or key was refused (also `warm_pool`). */
export class Unauthorized extends CustodyError {}
/** 403: the key is live but not for this namespace or run. */
export class Forbidden extends CustodyError {}
/** 404: no such memory, state, run, call or approval. */
export class NotFound extends CustodyError {}
/** 409, 410 or 412: the resource is not in the state the call needs. */
export class Conflict extends CustodyError {}
/** 429: too many exchanges; see `retryAfter`. */
export class RateLimited extends CustodyError {}
/** 5xx: custody (or a part of it) cannot serve the call now. */
export class Unavailable extends CustodyError {}
/** No HTTP answer: connection refused or reset, timeout, aborted. */
export class TransportError extends CustodyError {}
/** The TLS handshake failed: certificate not trusted, name mismatch, protocol. */
export class TLSError extends TransportError {}
/** The client is misconfigured: missing URL, unreadable token or CA file. */
export class ConfigError extends CustodyError {}

const byStatus: Record<number, typeof CustodyError> = {
  400: BadRequest,
  413: BadRequest,
  428: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  410: Conflict,
  412: Conflict,
  429: RateLimited,
};

const statusText: Record<number, string> = {
  400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
  405: "Method Not Allowed", 409: "Conflict", 410: "Gone", 412: "Precondition Failed",
  413: "Content Too Large", 428: "Precondition Required", 429: "Too Many Requests",
  500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
  504: "Gateway Timeout",
};

/**
 * Builds the error for a response with status >= 300 from its body and
 * `Retry-After` header (whole seconds; an HTTP date or junk is ignored).
 * The message is `custody: <status> <code>: <message>`, or, when the body
 * is not a custody error body, says so.
 */
export function errorFromResponse(status: number, body: string, retryAfterHeader: string | undefined): CustodyError {
  let code = "";
  let serverMessage = "";
  const details: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
      for (const [k, v] of Object.entries(parsed)) {
        if (k === "error" && typeof v === "string") code = v;
        else if (k === "message" && typeof v === "string") serverMessage = v;
        else details[k] = v;
      }
    }
  } catch {
    // not JSON: code stays "".
  }
  let retryAfter: number | undefined;
  if (retryAfterHeader !== undefined && /^\s*\d+\s*$/.test(retryAfterHeader)) {
    const n = Number.parseInt(retryAfterHeader, 10);
    if (n > 0) retryAfter = n;
  }
  const message = code
    ? `custody: ${status} ${code}: ${serverMessage}`
    : `custody answered ${status} ${statusText[status] ?? ""} (not a custody error body: is the URL or auth method right?)`;
  const Cls = byStatus[status] ?? (status >= 500 ? Unavailable : CustodyError);
  return new Cls(message, { status, code, serverMessage, retryAfter, details, body });
}
