// TLS: a local https server with a CA and certificates made here with the
// openssl CLI. The right CA is accepted, a wrong one (or Node's default
// trust) refused, a certificate for another name refused, TLS below 1.2
// refused.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import * as https from "node:https";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Client, CustodyError, TLSError } from "../dist/index.js";
import { assertNoSecret, tempDir } from "./harness.js";

const TOKEN = "tok-tls-secret-abcdef0123456789";
let tmp;
let tokenFile;
const f = (name) => join(tmp.dir, name);

function openssl(...args) {
  execFileSync("openssl", args, { cwd: tmp.dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** A self-signed CA: <name>.pem and <name>.key. */
function makeCA(name) {
  openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "2", "-subj", `/CN=${name}`,
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
}

/** A server certificate <name>.pem/.key for san, issued by ca. */
function makeCert(name, ca, san) {
  openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
  writeFileSync(f(`${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n`);
  openssl("x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.pem`, "-CAkey", `${ca}.key`, "-CAcreateserial",
    "-out", `${name}.pem`, "-days", "1", "-extfile", `${name}.ext`);
}

/** An https stand-in on 127.0.0.1 with cert; records each request's TLS version. */
async function httpsServer(cert, extra = {}) {
  const versions = [];
  const server = https.createServer({ key: readFileSync(f(`${cert}.key`)), cert: readFileSync(f(`${cert}.pem`)), ...extra }, (req, res) => {
    versions.push(req.socket.getProtocol());
    const body = req.url.startsWith("/v1/auth/")
      ? { key: "ck_tls_key_secret", key_id: "0".repeat(64), expires_at: new Date(Date.now() + 900_000).toISOString(), tenant: "t", agent: "a", session: "s" }
      : { memories: [] };
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  });
  server.on("tlsClientError", () => {});
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `https://127.0.0.1:${server.address().port}`,
    versions,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

before(() => {
  tmp = tempDir("custody-sdk-ts-tls-");
  tokenFile = f("token");
  writeFileSync(tokenFile, TOKEN);
  execFileSync("openssl", ["version"]); // the openssl CLI must exist: no skipping
  makeCA("ca");
  makeCA("wrong-ca");
  makeCert("server", "ca", "IP:127.0.0.1");
  makeCert("other-name", "ca", "DNS:custody.example");
});
after(() => tmp?.cleanup());

test("the right CA file is trusted (TLS 1.2 or later)", async () => {
  const s = await httpsServer("server");
  try {
    const c = Client.fromEnv({ CUSTODY_URL: s.url, CUSTODY_TOKEN_FILE: tokenFile, CUSTODY_AUTH: "static", CUSTODY_CA_FILE: f("ca.pem") });
    assert.equal((await c.exchange()).key, "ck_tls_key_secret");
    assert.deepEqual(await c.recall(), []);
    assert.ok(s.versions.every((v) => v === "TLSv1.2" || v === "TLSv1.3"), `versions ${s.versions}`);
    c.close();
  } finally {
    await s.close();
  }
});

test("a wrong CA file is refused with a clear TLSError", async () => {
  const s = await httpsServer("server");
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static", caFile: f("wrong-ca.pem") });
    const err = await c.exchange().catch((e) => e);
    assert.ok(err instanceof TLSError, `got ${err}`);
    assert.ok(err instanceof CustodyError);
    assert.equal(err.status, 0);
    assert.match(err.message, /TLS handshake refused: certificate not trusted: is CUSTODY_CA_FILE the CA/);
    assert.equal(s.versions.length, 0, "a request reached the server");
    await assertNoSecret(assert, err, TOKEN);
  } finally {
    await s.close();
  }
});

test("without a CA file Node's default trust applies: a private CA is refused", async () => {
  const s = await httpsServer("server");
  try {
    const err = await new Client({ url: s.url, tokenFile, method: "static" }).exchange().catch((e) => e);
    assert.ok(err instanceof TLSError, `got ${err}`);
    assert.match(err.message, /not trusted by Node's default CAs: set CUSTODY_CA_FILE/);
  } finally {
    await s.close();
  }
});

test("a certificate for another name is refused", async () => {
  const s = await httpsServer("other-name");
  try {
    const err = await new Client({ url: s.url, tokenFile, method: "static", caFile: f("ca.pem") }).exchange().catch((e) => e);
    assert.ok(err instanceof TLSError, `got ${err}`);
    assert.match(err.message, /not for this host name/);
    assert.match(err.message, /ERR_TLS_CERT_ALTNAME_INVALID/);
    await assertNoSecret(assert, err, TOKEN);
  } finally {
    await s.close();
  }
});

test("a server offering only TLS 1.1 is refused", async () => {
  const s = await httpsServer("server", { minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT@SECLEVEL=0" });
  try {
    const err = await new Client({ url: s.url, tokenFile, method: "static", caFile: f("ca.pem") }).exchange().catch((e) => e);
    assert.ok(err instanceof TLSError, `got ${err}`);
    assert.match(err.message, /TLS protocol error/);
    assert.equal(s.versions.length, 0);
  } finally {
    await s.close();
  }
});

test("a plain-HTTP server at an https URL is a TLSError, not a hang", async () => {
  const { standIn } = await import("./harness.js");
  const s = await standIn(() => ({ status: 200, body: {} }));
  try {
    const url = s.url.replace("http:", "https:");
    const err = await new Client({ url, tokenFile, method: "static", caFile: f("ca.pem"), timeoutMs: 5000 }).exchange().catch((e) => e);
    assert.ok(err instanceof TLSError, `got ${err}`);
  } finally {
    await s.close();
  }
});
