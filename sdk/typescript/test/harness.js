// Test harness: a real `custody serve` on 127.0.0.1, and small local
// stand-in servers for what a single custody cannot be made to answer.
//
// The custody binary is $CUSTODY_BIN, or built once per `node --test` run
// (shared by its test files through the runner's pid) with
// `nice -n 19 go build -o <tmp>/custody ./cmd/custody` from the repository
// this directory sits in. Each Custody runs with static auth (a tokens file
// of SHA-256 hashes), SQLite in a temporary data directory, the signer on
// with the example policies of deploy/base/policies, the admin listener
// with a generated admin token, and no gateway or metrics listener.
// Nothing listens beyond 127.0.0.1.
//
// custody serves TLS on every listener unless told otherwise, so a Custody
// is either plaintext (the default: --plaintext=all) or, with { tls },
// serves a certificate issued by a test CA made once per test process with
// the openssl CLI (testCA()).

import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO = join(HERE, "..", "..", "..");

/** The custody binary: $CUSTODY_BIN, or one built for this test run. */
export function custodyBinary() {
  const env = process.env.CUSTODY_BIN;
  if (env) {
    if (!existsSync(env)) throw new Error(`CUSTODY_BIN=${env} does not exist`);
    return env;
  }
  const dir = join(tmpdir(), `custody-sdk-ts-bin-${process.ppid}`);
  const out = join(dir, "custody");
  if (existsSync(out)) return out;
  mkdirSync(dir, { recursive: true });
  const go = existsSync("/usr/local/go/bin/go") ? "/usr/local/go/bin/go" : "go";
  process.stderr.write(`building custody for the SDK tests: nice -n 19 ${go} build -o ${out} ./cmd/custody\n`);
  execFileSync("nice", ["-n", "19", go, "build", "-o", out + ".tmp", "./cmd/custody"], { cwd: REPO, stdio: "inherit" });
  execFileSync("mv", [out + ".tmp", out]);
  return out;
}

/** A free TCP port on 127.0.0.1 (free when asked; custody binds it next). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sha256 = (s) => createHash("sha256").update(s).digest("hex");

function openssl(cwd, ...args) {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * A CA made with the openssl CLI in its own directory (ca: its PEM file),
 * issuing server certificates with issue(); cert/key are its default leaf,
 * for IP:127.0.0.1 and DNS:localhost.
 */
export class TestCA {
  constructor(name = "custody-sdk-test-ca") {
    execFileSync("openssl", ["version"], { stdio: "ignore" }); // the openssl CLI must exist: no skipping
    this.dir = mkdtempSync(join(tmpdir(), "custody-sdk-ts-ca-"));
    process.once("exit", () => rmSync(this.dir, { recursive: true, force: true }));
    this.ca = join(this.dir, "ca.pem");
    this.caKey = join(this.dir, "ca.key");
    this.n = 0;
    openssl(this.dir, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", this.caKey, "-out", this.ca, "-days", "2", "-subj", `/CN=${name}`,
      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
    ({ cert: this.cert, key: this.key } = this.issue("IP:127.0.0.1,DNS:localhost"));
  }

  /**
   * A server certificate for san (e.g. "DNS:localhost") with a fresh P-256
   * key, written to cert and key (default: new files in the CA's
   * directory); returns {cert, key}.
   */
  issue(san, cert, key) {
    const base = join(this.dir, `leaf-${++this.n}`);
    cert ??= `${base}.pem`;
    key ??= `${base}.key`;
    writeFileSync(`${base}.ext`, `subjectAltName=${san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`);
    openssl(this.dir, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", key, "-out", `${base}.csr`, "-subj", `/CN=custody-${this.n}`);
    openssl(this.dir, "x509", "-req", "-in", `${base}.csr`, "-CA", this.ca, "-CAkey", this.caKey,
      "-set_serial", BigInt("0x" + randomBytes(8).toString("hex")).toString(), "-out", cert, "-days", "2",
      "-extfile", `${base}.ext`);
    return { cert, key };
  }
}

let theCA;
/** The test CA and its default leaf, made once per test process. */
export function testCA() {
  theCA ??= new TestCA();
  return theCA;
}

/**
 * A running `custody serve`. identities: name -> [tenant, agent, session];
 * each gets a random token in tokenFile(name). opts.tls: false (default)
 * serves plain HTTP (--plaintext=all); true serves testCA()'s default leaf
 * on every listener; {cert, key} serves that certificate, which must be
 * issued by testCA() for IP:127.0.0.1. With TLS, url and adminURL are https
 * and caFile the CA to trust (else undefined).
 */
export class Custody {
  static async start(identities, extraArgs = [], opts = {}) {
    const c = new Custody(identities);
    await c.#start(extraArgs, opts.tls ?? false);
    return c;
  }

  constructor(identities) {
    this.dir = mkdtempSync(join(tmpdir(), "custody-sdk-ts-"));
    this.tokens = {};
    const lines = ["tokens:"];
    for (const [name, [tenant, agent, session]] of Object.entries(identities)) {
      const tok = "tok-" + randomBytes(24).toString("hex");
      this.tokens[name] = tok;
      writeFileSync(this.tokenFile(name), tok + "\n", { mode: 0o600 });
      lines.push(`  - sha256: ${sha256(tok)}`, `    tenant: ${tenant}`, `    agent: ${agent}`, `    session: ${session}`);
    }
    writeFileSync(join(this.dir, "tokens.yaml"), lines.join("\n") + "\n");
    this.adminToken = randomBytes(32).toString("base64url");
    writeFileSync(join(this.dir, "admin-token"), this.adminToken, { mode: 0o600 });
  }

  tokenFile(name) {
    return join(this.dir, `token-${name}`);
  }

  async #start(extraArgs, tls) {
    const bin = custodyBinary();
    this.port = await freePort();
    this.adminPort = await freePort();
    let tlsArgs = ["--plaintext=all"];
    if (tls) {
      const ca = testCA();
      const { cert, key } = tls === true ? ca : tls;
      this.caFile = ca.ca;
      // The harness's own calls (readiness, admin) verify the certificate
      // and the name 127.0.0.1 like any client.
      this.ca = readFileSync(ca.ca);
      tlsArgs = ["--tls-cert-file", cert, "--tls-key-file", key];
    }
    const scheme = tls ? "https" : "http";
    this.url = `${scheme}://127.0.0.1:${this.port}`;
    this.adminURL = `${scheme}://127.0.0.1:${this.adminPort}`;
    const args = [
      "serve",
      "--data-dir", join(this.dir, "data"),
      "--listen", `127.0.0.1:${this.port}`,
      "--admin-listen", `127.0.0.1:${this.adminPort}`,
      "--gateway-listen", "",
      "--metrics-listen", "",
      "--admin-token-file", join(this.dir, "admin-token"),
      "--static-tokens-file", join(this.dir, "tokens.yaml"),
      "--kubernetes-auth=false",
      "--policy-dir", join(REPO, "deploy", "base", "policies"),
      ...tlsArgs,
      ...extraArgs,
    ];
    this.logFile = join(this.dir, "custody.log");
    const fd = openSync(this.logFile, "w");
    this.proc = spawn(bin, args, { stdio: ["ignore", fd, fd] });
    closeSync(fd);
    this.exited = new Promise((resolve) => this.proc.once("exit", resolve));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (this.proc.exitCode !== null) throw new Error(`custody exited ${this.proc.exitCode}:\n${this.log()}`);
      try {
        const r = await request("GET", this.url + "/readyz", undefined, {}, { ca: this.ca });
        if (r.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`custody not ready within 60 s:\n${this.log()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  log() {
    try {
      return readFileSync(this.logFile, "utf8").split("\n").slice(-40).join("\n");
    } catch {
      return "";
    }
  }

  /** A call on the admin listener with the admin token; returns {status, body}. */
  admin(method, path, body) {
    return request(method, this.adminURL + path, body, { Authorization: `Bearer ${this.adminToken}` }, { ca: this.ca });
  }

  /** Config for a Client speaking as identity name (trusting caFile with TLS). */
  config(name, extra = {}) {
    const ca = this.caFile ? { caFile: this.caFile } : {};
    return { url: this.url, tokenFile: this.tokenFile(name), method: "static", ...ca, ...extra };
  }

  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill("SIGTERM");
      const t = setTimeout(() => this.proc.kill("SIGKILL"), 10_000);
      await this.exited;
      clearTimeout(t);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A request without the SDK, over http or (for an https URL, trusting
 * opts.ca, PEM) https: resolves {status, headers, body}.
 */
export function request(method, url, body, headers = {}, opts = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    const h = { ...headers };
    if (data) {
      h["Content-Type"] = "application/json";
      h["Content-Length"] = String(data.length);
    }
    const tls = url.startsWith("https:") ? { ca: opts.ca, minVersion: "TLSv1.2" } : {};
    const r = (url.startsWith("https:") ? https : http).request(url, { method, headers: h, agent: false, ...tls }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, body: json, text });
      });
    });
    r.on("error", reject);
    r.end(data);
  });
}

/**
 * A stand-in custody on 127.0.0.1: handler(req, body) returns
 * {status, headers?, body?} (body: object -> JSON, string -> as is).
 * Every request is kept in `requests` as {method, url, headers, body}.
 */
export async function standIn(handler) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const rec = { method: req.method, url: req.url, headers: req.headers, body };
      requests.push(rec);
      const out = await handler(rec);
      const payload = out.body === undefined ? "" : typeof out.body === "string" ? out.body : JSON.stringify(out.body);
      const headers = { ...(out.headers ?? {}) };
      if (out.body !== undefined && typeof out.body !== "string") headers["Content-Type"] = "application/json";
      res.writeHead(out.status, headers);
      res.end(payload);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

/** A temporary directory removed by the returned cleanup. */
export function tempDir(prefix = "custody-sdk-ts-") {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Asserts no text form of err (message, stack, inspect, JSON) contains any secret. */
export async function assertNoSecret(assert, err, ...secrets) {
  const { inspect } = await import("node:util");
  const forms = [String(err), err.message, err.stack ?? "", inspect(err, { depth: 10 }), JSON.stringify(err)];
  for (const s of secrets) {
    for (const f of forms) {
      assert.ok(!f.includes(s), `an error's text holds a secret: ${f}`);
    }
  }
}
