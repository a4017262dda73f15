// Exchange, re-exchange and refusals against a real custody serve.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { after, before, test } from "node:test";

import { Client, ConfigError, CustodyError, Unauthorized } from "../dist/index.js";
import { Custody, assertNoSecret } from "./harness.js";

let custody;
before(async () => {
  custody = await Custody.start({
    a: ["agents", "dev", "laptop"],
    b: ["agents", "dev", "desktop"],
    other: ["agents", "other", "laptop"],
  });
});
after(async () => {
  await custody?.stop();
});

test("exchange returns a key for the token's identity and keeps it", async () => {
  const c = new Client(custody.config("a"));
  const k = await c.exchange();
  assert.match(k.key, /^ck_/);
  assert.match(k.key_id, /^[0-9a-f]{64}$/);
  assert.equal(k.tenant, "agents");
  assert.equal(k.agent, "dev");
  assert.equal(k.session, "laptop");
  assert.ok(Date.parse(k.expires_at) > Date.now() + 10 * 60_000, `expires_at ${k.expires_at} is not ~15 min away`);
  const again = await c.currentKey();
  assert.equal(again.key, k.key, "currentKey exchanged again while the key was live");
});

test("fromEnv reads CUSTODY_URL, CUSTODY_TOKEN_FILE and CUSTODY_AUTH", async () => {
  const c = Client.fromEnv({ CUSTODY_URL: custody.url, CUSTODY_TOKEN_FILE: custody.tokenFile("a"), CUSTODY_AUTH: "static" });
  assert.equal((await c.currentKey()).session, "laptop");
  assert.throws(() => Client.fromEnv({ CUSTODY_URL: custody.url }), ConfigError);
  assert.throws(() => Client.fromEnv({ CUSTODY_URL: custody.url, CUSTODY_TOKEN_FILE: "x", CUSTODY_AUTH: "ldap" }), ConfigError);
  // A CA file means TLS: an http URL with one is refused.
  assert.throws(() => Client.fromEnv({ CUSTODY_URL: "http://127.0.0.1:1", CUSTODY_TOKEN_FILE: "x", CUSTODY_CA_FILE: "ca.pem" }), /not https/);
});

test("a bad token is refused with custody's code and no secret in the error", async () => {
  const bad = "tok-" + "f".repeat(48);
  const file = custody.tokenFile("bad");
  writeFileSync(file, bad);
  const c = new Client({ ...custody.config("a"), tokenFile: file });
  const err = await c.remember("fact", "never stored").catch((e) => e);
  assert.ok(err instanceof Unauthorized, `got ${err}`);
  assert.ok(err instanceof CustodyError);
  assert.equal(err.status, 401);
  assert.equal(err.code, "unauthenticated");
  assert.match(err.message, /custody: 401 unauthenticated/);
  await assertNoSecret(assert, err, bad);
});

test("a revoked key whose re-exchange is refused: neither key nor token in the error", async () => {
  const file = custody.tokenFile("soon-bad");
  writeFileSync(file, custody.tokens.a);
  const c = new Client({ ...custody.config("a"), tokenFile: file });
  const k = await c.exchange();
  assert.equal((await custody.admin("POST", `/v1/admin/keys/${k.key_id}/revoke`)).status, 204);
  const bad = "tok-" + "0".repeat(48);
  writeFileSync(file, bad);
  const err = await c.recall().catch((e) => e);
  assert.ok(err instanceof Unauthorized, `got ${err}`);
  assert.equal(err.code, "unauthenticated");
  await assertNoSecret(assert, err, k.key, bad, custody.tokens.a);
});

test("a missing token file is a ConfigError naming the file", async () => {
  const c = new Client({ ...custody.config("a"), tokenFile: custody.tokenFile("missing") });
  const err = await c.exchange().catch((e) => e);
  assert.ok(err instanceof ConfigError, `got ${err}`);
  assert.match(err.message, /token-missing: ENOENT/);
});

test("a key revoked on the admin listener is re-exchanged once and the call retried", async () => {
  const c = new Client(custody.config("a"));
  const k1 = await c.exchange();
  await c.remember("fact", "before revocation");
  const r = await custody.admin("POST", `/v1/admin/agents/agents/dev/revoke`);
  assert.equal(r.status, 200);
  assert.ok(r.body.revoked >= 1, `revoked ${JSON.stringify(r.body)}`);
  const got = await c.recall("revocation");
  assert.ok(got.some((m) => m.text === "before revocation"), "the retried recall did not find the memory");
  const k2 = await c.currentKey();
  assert.notEqual(k2.key, k1.key, "no re-exchange happened");
});

test("revoke forgets the key; the next call exchanges again", async () => {
  const c = new Client(custody.config("a"));
  const k1 = await c.exchange();
  await c.revoke();
  await c.recall();
  const k2 = await c.currentKey();
  assert.notEqual(k2.key, k1.key);
  await c.revoke();
  await c.revoke(); // no key: nothing to do
});

test("the token file is read again at every exchange", async () => {
  const file = custody.tokenFile("rotating");
  writeFileSync(file, custody.tokens.a);
  const c = new Client({ ...custody.config("a"), tokenFile: file });
  assert.equal((await c.exchange()).session, "laptop");
  writeFileSync(file, custody.tokens.b + "\n");
  assert.equal((await c.exchange()).session, "desktop");
});

test("a key near expiry is re-exchanged before use", async () => {
  let skew = 0;
  const c = new Client(custody.config("a", { now: () => Date.now() + skew }));
  const k1 = await c.currentKey();
  skew = Date.parse(k1.expires_at) - Date.now() - 30_000; // 30 s left, under the 60 s default
  const k2 = await c.currentKey();
  assert.notEqual(k2.key, k1.key, "a key 30 s from expiry was reused");
});

test("concurrent calls without a key share one exchange", async () => {
  const c = new Client(custody.config("a"));
  const keys = await Promise.all([c.currentKey(), c.currentKey(), c.currentKey()]);
  assert.equal(new Set(keys.map((k) => k.key)).size, 1);
});
