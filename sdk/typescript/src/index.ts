/**
 * custody's TypeScript client for agents in Kubernetes sandboxes: identity
 * exchange with automatic re-exchange, memory, working state with fenced
 * leases, and the signer (runs, decisions, approvals). No runtime
 * dependencies; Node 20 or later.
 *
 * ```ts
 * import { Client, Conflict } from "@agentcustody/custody";
 * const c = Client.fromEnv();            // CUSTODY_URL, CUSTODY_TOKEN_FILE, ...
 * const run = await c.registerRun();
 * const d = await c.decide(run.run, "c1", "Bash", { command: "ls" });
 * ```
 *
 * @module
 */

export { Client, type WaitOptions } from "./client.js";
export { type AuthMethod, type Config, type ResolvedConfig, configFromEnv, resolveConfig } from "./config.js";
export {
  BadRequest,
  ConfigError,
  Conflict,
  CustodyError,
  type CustodyErrorInit,
  Forbidden,
  NotFound,
  RateLimited,
  TLSError,
  TransportError,
  Unauthorized,
  Unavailable,
  errorFromResponse,
} from "./errors.js";
export type {
  JSONValue,
  Lease,
  LeaseHolder,
  LeaseOptions,
  Memory,
  RecallOptions,
  Remembered,
  RememberOptions,
  State,
} from "./memory.js";
export { type CallOptions, type Key, Session } from "./session.js";
export type { Appended, Approval, Args, Decision, ModelEvent, Run } from "./signer.js";
