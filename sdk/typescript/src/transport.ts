/**
 * The HTTP transport: one code path over `node:http` and `node:https` for
 * every request (no global `fetch`, whose undici cannot take a CA bundle
 * per request without a dependency).
 *
 * https is verified: the server's chain against the CA bundle of
 * `caFile` (only it) or, without one, Node's default trust (its bundled
 * Mozilla roots plus `NODE_EXTRA_CA_CERTS`; run Node with
 * `--use-openssl-ca` for the system's OpenSSL store); the host name (or
 * IP address) is checked against the certificate; TLS 1.2 is the minimum.
 * Connections are kept alive and reused; idle ones do not keep the
 * process running.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";

import { ConfigError, CustodyError, TLSError, TransportError, errorFromResponse } from "./errors.js";

/** Largest response body read: 8 MiB, as the Go client. */
export const maxResponseBytes = 8 << 20;

/**
 * Connections are kept alive; one idle for 15 s is closed (custody closes
 * idle ones after 120 s, proxies often sooner). The socket timeout only
 * closes idle sockets: a request's own limit is its timeoutMs.
 */
const keepAlive: http.AgentOptions = { keepAlive: true, timeout: 15_000 };

/** Options of a {@link Transport}. */
export interface TransportOptions {
  /** custody's base URL, `http://` or `https://`, without credentials. */
  url: string;
  /** PEM CA bundle trusted (alone) for an https URL; read once, here. */
  caFile?: string | undefined;
  /** Longest time one request may take, headers and body, in ms. */
  timeoutMs: number;
}

/** One request: path is relative to the base URL and starts with `/`. */
export interface TransportRequest {
  method: string;
  path: string;
  /** A JSON body, sent with `Content-Type: application/json`. */
  body?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** Bearer credential for `Authorization`; never part of an error. */
  bearer?: string | undefined;
  signal?: AbortSignal | undefined;
  /** Overrides the transport's timeout for this request, in ms. */
  timeoutMs?: number | undefined;
}

/** A response with status < 300; its body as text ("" if none). */
export interface TransportResponse {
  status: number;
  body: string;
}

/**
 * Sends requests to one custody. Safe for concurrent use. A status >= 300
 * is thrown as a {@link CustodyError} subclass ({@link errorFromResponse});
 * no answer as a {@link TransportError} ({@link TLSError} for a refused
 * handshake).
 */
export class Transport {
  /** The base URL; its path (without a trailing slash) prefixes every request's. */
  readonly base: URL;
  readonly #basePath: string;
  readonly #timeoutMs: number;
  readonly #agent: http.Agent;
  readonly #lib: typeof http | typeof https;
  /** undefined for http; for https, whether a CA file was given. */
  readonly #tls: { hasCA: boolean } | undefined;

  /** @throws {ConfigError} a URL that is not http(s), has credentials, or an unreadable or empty CA file. */
  constructor(opts: TransportOptions) {
    let u: URL;
    try {
      u = new URL(opts.url);
    } catch {
      throw new ConfigError("custody: CUSTODY_URL is not a URL");
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new ConfigError(`custody: URL scheme ${u.protocol} is not http: or https:`);
    }
    if (u.username || u.password) {
      throw new ConfigError("custody: URL must not carry credentials");
    }
    if (u.search || u.hash) {
      throw new ConfigError("custody: URL must not have a query or fragment");
    }
    this.#basePath = u.pathname.replace(/\/+$/, "");
    this.base = u;
    this.#timeoutMs = opts.timeoutMs;
    this.#tls = u.protocol === "https:" ? { hasCA: Boolean(opts.caFile) } : undefined;
    if (u.protocol === "https:") {
      const agentOpts: https.AgentOptions = { ...keepAlive, minVersion: "TLSv1.2", rejectUnauthorized: true };
      if (opts.caFile) agentOpts.ca = readCA(opts.caFile);
      this.#agent = new https.Agent(agentOpts);
      this.#lib = https;
    } else {
      this.#agent = new http.Agent(keepAlive);
      this.#lib = http;
    }
  }

  /** Closes idle connections; later requests open new ones. */
  close(): void {
    this.#agent.destroy();
  }

  /** Sends one request; see the class doc for what it throws. */
  request(req: TransportRequest): Promise<TransportResponse> {
    const what = `${req.method} ${req.path.split("?")[0]}`;
    const timeoutMs = req.timeoutMs ?? this.#timeoutMs;
    const signal = req.signal;
    if (signal?.aborted) {
      return Promise.reject(new TransportError(`custody: ${what}: aborted`, { cause: signal.reason }));
    }
    const headers: Record<string, string> = { Accept: "application/json", ...(req.headers ?? {}) };
    let payload: Buffer | undefined;
    if (req.body !== undefined) {
      payload = Buffer.from(req.body, "utf8");
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(payload.length);
    }
    if (req.bearer) headers["Authorization"] = `Bearer ${req.bearer}`;
    const url = new URL(this.base.href);
    const [p, q] = splitQuery(req.path);
    url.pathname = this.#basePath + p;
    url.search = q;

    return new Promise<TransportResponse>((resolve, reject) => {
      let settled = false;
      let current: http.ClientRequest | undefined;
      const finish = (err: CustodyError | undefined, res?: TransportResponse) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(res as TransportResponse);
      };
      // send makes one attempt. A kept-alive connection the server closed
      // while it was idle fails at once (ECONNRESET/EPIPE on a reused
      // socket, before any answer). A GET or HEAD is then sent once more
      // on a new connection, as Go's net/http does for a replayable
      // request. Anything else is not: the same error also comes from a
      // connection reset after custody read and recorded the request, and
      // a second decide, register or remember would be a second request.
      const send = (mayResend: boolean) => {
        let answered = false;
        const r = this.#lib.request(url, { method: req.method, headers, agent: this.#agent }, (res) => {
          answered = true;
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.length;
            if (size > maxResponseBytes) {
              finish(new TransportError(`custody: ${what}: response over ${maxResponseBytes} bytes`));
              res.destroy();
              return;
            }
            chunks.push(c);
          });
          res.on("error", (e) => finish(networkError(what, e, this.#tls)));
          res.on("end", () => {
            const status = res.statusCode ?? 0;
            const body = Buffer.concat(chunks).toString("utf8");
            if (status >= 300) {
              const ra = res.headers["retry-after"];
              finish(errorFromResponse(status, body, Array.isArray(ra) ? ra[0] : ra));
            } else {
              finish(undefined, { status, body });
            }
          });
        });
        r.on("error", (e) => {
          const code = (e as NodeJS.ErrnoException).code;
          if (mayResend && !answered && !settled && r.reusedSocket && (code === "ECONNRESET" || code === "EPIPE")) {
            send(false);
            return;
          }
          finish(networkError(what, e, this.#tls));
        });
        current = r;
        r.end(payload);
      };
      const timer = setTimeout(() => {
        finish(new TransportError(`custody: ${what}: no answer within ${timeoutMs} ms`));
        current?.destroy();
      }, timeoutMs);
      const onAbort = () => {
        finish(new TransportError(`custody: ${what}: aborted`, { cause: signal?.reason }));
        current?.destroy();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      send(req.method === "GET" || req.method === "HEAD");
    });
  }
}

function splitQuery(path: string): [string, string] {
  const i = path.indexOf("?");
  return i < 0 ? [path, ""] : [path.slice(0, i), path.slice(i)];
}

/** Reads a PEM CA bundle; it must hold at least one certificate. */
function readCA(file: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, "utf8");
  } catch (e) {
    throw new ConfigError(`custody: read CA file ${file}: ${(e as NodeJS.ErrnoException).code ?? "error"}`, { cause: e });
  }
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) {
    throw new ConfigError(`custody: CA file ${file}: no PEM certificate in file`);
  }
  return pem;
}

/** OpenSSL verify and Node TLS error codes: the handshake was refused. */
const tlsCode = /^(ERR_TLS_|ERR_SSL_)|CERT|SELF_SIGNED|UNABLE_TO_|SIGNATURE|ISSUER|HOSTNAME|CHAIN|EPROTO/;

function networkError(what: string, e: Error, tls: { hasCA: boolean } | undefined): CustodyError {
  const code = (e as NodeJS.ErrnoException).code ?? "";
  const detail = e.message.trim();
  if (tls && tlsCode.test(code)) {
    let hint = tls.hasCA
      ? "certificate not trusted: is CUSTODY_CA_FILE the CA that issued custody's certificate?"
      : "certificate not trusted by Node's default CAs: set CUSTODY_CA_FILE to the CA that issued custody's certificate";
    if (code === "ERR_TLS_CERT_ALTNAME_INVALID") hint = "the certificate is not for this host name: does CUSTODY_URL name the host the certificate was issued for?";
    else if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") hint = "the certificate is outside its validity period";
    else if (code === "EPROTO" || code.startsWith("ERR_SSL_")) hint = "TLS protocol error (a TLS version below 1.2, or not a TLS server?)";
    return new TLSError(`custody: ${what}: TLS handshake refused: ${hint} (${code}: ${detail})`, { cause: e });
  }
  return new TransportError(`custody: ${what}: ${code ? code + ": " : ""}${detail}`, { cause: e });
}
