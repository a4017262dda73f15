/**
 * Client configuration and the environment it is read from.
 *
 * The SandboxTemplate in deploy/ sets:
 *
 * | variable             | meaning                                                        |
 * |----------------------|----------------------------------------------------------------|
 * | `CUSTODY_URL`        | custody's API, e.g. `http://custody.custody-system.svc:8865`   |
 * | `CUSTODY_TOKEN_FILE` | the projected token, e.g. `/var/run/secrets/custody/token`     |
 * | `CUSTODY_AUTH`       | `kubernetes` (default) or `static`                             |
 * | `CUSTODY_CA_FILE`    | PEM CA bundle trusted (alone) for an https `CUSTODY_URL`       |
 *
 * @module
 */

import { ConfigError } from "./errors.js";

/** The exchange method: `POST /v1/auth/{method}`. */
export type AuthMethod = "kubernetes" | "static";

/** Configures a {@link Client}. */
export interface Config {
  /** custody's API base URL (`http://` or `https://`). Required. */
  url: string;
  /**
   * The file holding the token to exchange (surrounding whitespace is
   * trimmed). Read again at every exchange: the kubelet rotates projected
   * tokens. Required.
   */
  tokenFile: string;
  /** The auth method. Default `"kubernetes"`. */
  method?: AuthMethod | undefined;
  /**
   * PEM CA bundle trusted for an https URL, read once when the client is
   * made; when set, only it is trusted. Default: Node's default trust.
   */
  caFile?: string | undefined;
  /** Longest time one HTTP request may take, in ms. Default 30 000. */
  timeoutMs?: number | undefined;
  /** Re-exchange this long before the key's expiry, in ms. Default 60 000. */
  refreshBeforeMs?: number | undefined;
  /**
   * How long a signer call keeps retrying while custody answers 503
   * `signer_standby` (with several replicas, one holds the signer's writer
   * lease; during a hand-over none does), each retry after the answer's
   * `Retry-After`, in ms. Default 30 000; negative: no retry.
   */
  standbyWaitMs?: number | undefined;
  /** The clock, in ms since the epoch. Default `Date.now`. */
  now?: (() => number) | undefined;
}

/** A {@link Config} with every default filled in. */
export interface ResolvedConfig {
  url: string;
  tokenFile: string;
  method: AuthMethod;
  caFile: string | undefined;
  timeoutMs: number;
  refreshBeforeMs: number;
  standbyWaitMs: number;
  now: () => number;
}

/**
 * Reads a {@link Config} from `CUSTODY_URL`, `CUSTODY_TOKEN_FILE`,
 * `CUSTODY_AUTH` and `CUSTODY_CA_FILE` in `env` (default `process.env`).
 * Empty values count as unset.
 *
 * @throws {ConfigError} `CUSTODY_URL` or `CUSTODY_TOKEN_FILE` unset.
 */
export function configFromEnv(env: Record<string, string | undefined> = process.env): Config {
  const url = env["CUSTODY_URL"] ?? "";
  const tokenFile = env["CUSTODY_TOKEN_FILE"] ?? "";
  if (!url || !tokenFile) {
    throw new ConfigError("custody: CUSTODY_URL and CUSTODY_TOKEN_FILE must be set");
  }
  return {
    url,
    tokenFile,
    method: (env["CUSTODY_AUTH"] || undefined) as AuthMethod | undefined,
    caFile: env["CUSTODY_CA_FILE"] || undefined,
  };
}

/**
 * Validates cfg and fills in defaults.
 *
 * @throws {ConfigError} missing url or tokenFile, an unknown method, a
 *   negative or non-finite duration, or a caFile with a url that is not
 *   https.
 */
export function resolveConfig(cfg: Config): ResolvedConfig {
  if (!cfg.url || !cfg.tokenFile) {
    throw new ConfigError("custody: url and tokenFile are required");
  }
  const method = cfg.method || "kubernetes";
  if (method !== "kubernetes" && method !== "static") {
    throw new ConfigError(`custody: unknown auth method ${JSON.stringify(String(method))}`);
  }
  for (const [name, v] of [["timeoutMs", cfg.timeoutMs], ["refreshBeforeMs", cfg.refreshBeforeMs]] as const) {
    if (v !== undefined && !(Number.isFinite(v) && v >= 0)) {
      throw new ConfigError(`custody: ${name} must be a non-negative number of ms`);
    }
  }
  if (cfg.caFile && !cfg.url.toLowerCase().startsWith("https://")) {
    // A CA file says TLS was meant: the token must not go in clear.
    throw new ConfigError("custody: CUSTODY_CA_FILE is set but CUSTODY_URL is not https://");
  }
  if (cfg.standbyWaitMs !== undefined && !Number.isFinite(cfg.standbyWaitMs)) {
    throw new ConfigError("custody: standbyWaitMs must be a finite number of ms");
  }
  return {
    url: cfg.url,
    tokenFile: cfg.tokenFile,
    method,
    caFile: cfg.caFile || undefined,
    timeoutMs: cfg.timeoutMs || 30_000,
    refreshBeforeMs: cfg.refreshBeforeMs || 60_000,
    standbyWaitMs: cfg.standbyWaitMs || 30_000,
    now: cfg.now ?? Date.now,
  };
}
