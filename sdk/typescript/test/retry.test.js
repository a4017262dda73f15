// What a single custody cannot be made to answer, from a stand-in on
// 127.0.0.1: signer_standby retries, a 401 on a live key, 429, pages that
// are not custody error bodies, timeouts and aborts.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import {
  Client,
  ConfigError,
  CustodyError,
  RateLimited,
  TransportError,
  Unauthorized,
  Unavailable,
} from "../dist/index.js";
import { assertNoSecret, standIn, tempDir } from "./harness.js";

const TOKEN = "tok-stand-in-secret-0123456789";
let tmp;
let tokenFile;
before(() => {
  tmp = tempDir();
  tokenFile = join(tmp.dir, "token");
  writeFileSync(tokenFile, TOKEN);
});
after(() => tmp.cleanup());

let keys = 0;
/** An exchange answer: a fresh key valid for validMs. */
function exchanged(validMs = 15 * 60_000) {
  keys++;
  return {
    status: 200,
    body: {
      key: `ck_standin_${keys}`,
      key_id: "0".repeat(64),
      expires_at: new Date(Date.now() + validMs).toISOString(),
      tenant: "t",
      agent: "a",
      session: "s",
    },
  };
}

const standby = { status: 503, headers: { "Retry-After": "1" }, body: { error: "signer_standby", message: "this replica is on standby" } };
const run = { status: 201, body: { run: "r1", tenant: "t", agent: "a", session: "s", closed: false, records: 1, pending_approvals: 0 } };

test("signer calls retry 503 signer_standby after Retry-After, then succeed", async () => {
  let runs = 0;
  const s = await standIn((r) => (r.url.startsWith("/v1/auth/") ? exchanged() : ++runs <= 2 ? standby : run));
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static" });
    const t0 = Date.now();
    const got = await c.registerRun();
    assert.equal(got.run, "r1");
    assert.equal(runs, 3);
    assert.ok(Date.now() - t0 >= 1900, `retried after ${Date.now() - t0} ms, not after Retry-After`);
  } finally {
    await s.close();
  }
});

test("signer_standby past standbyWaitMs, or with a negative one, surfaces as Unavailable", async () => {
  let runs = 0;
  const s = await standIn((r) => (r.url.startsWith("/v1/auth/") ? exchanged() : (runs++, standby)));
  try {
    for (const [wait, calls] of [[500, 1], [-1, 1], [1500, 2]]) {
      runs = 0;
      const c = new Client({ url: s.url, tokenFile, method: "static", standbyWaitMs: wait });
      const err = await c.runStatus("r1").catch((e) => e);
      assert.ok(err instanceof Unavailable, `standbyWaitMs ${wait}: got ${err}`);
      assert.equal(err.code, "signer_standby");
      assert.equal(err.retryAfter, 1);
      assert.equal(runs, calls, `standbyWaitMs ${wait}: ${runs} calls`);
    }
  } finally {
    await s.close();
  }
});

test("nothing else is retried: another 503, a 500, a memory call's signer_standby", async () => {
  let calls = 0;
  let answer;
  const s = await standIn((r) => (r.url.startsWith("/v1/auth/") ? exchanged() : (calls++, answer)));
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static" });
    for (const [a, call] of [
      [{ status: 503, headers: { "Retry-After": "1" }, body: { error: "unavailable", message: "signer unavailable" } }, () => c.registerRun()],
      [{ status: 500, body: { error: "internal", message: "memory store unavailable" } }, () => c.recall()],
      [standby, () => c.getState("x")],
    ]) {
      answer = a;
      calls = 0;
      const err = await call().catch((e) => e);
      assert.ok(err instanceof Unavailable, `got ${err}`);
      assert.equal(err.code, a.body.error);
      assert.equal(calls, 1, `${a.body.error} was retried`);
    }
  } finally {
    await s.close();
  }
});

test("a 401 on a live key: one re-exchange and one retry, then the refusal surfaces", async () => {
  let exchanges = 0;
  let refuse = 1;
  const seen = [];
  const s = await standIn((r) => {
    if (r.url === "/v1/auth/static") {
      exchanges++;
      assert.deepEqual(JSON.parse(r.body), { token: TOKEN });
      return exchanged();
    }
    seen.push(r.headers.authorization);
    if (refuse-- > 0) return { status: 401, body: { error: "unauthenticated", message: "missing, invalid, expired or revoked key" } };
    return { status: 200, body: { memories: [{ id: "m1", kind: "fact", text: "x", session: "s", created_at: "2026-01-01T00:00:00Z" }] } };
  });
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static" });
    const got = await c.recall("x");
    assert.equal(got[0].id, "m1");
    assert.equal(exchanges, 2);
    assert.equal(seen.length, 2);
    assert.notEqual(seen[0], seen[1], "the retry reused the refused key");
    assert.ok(s.requests.some((r) => r.url === "/v1/memory/t/a/memories?q=x"), "recall path");

    refuse = 5;
    exchanges = 0;
    const err = await c.recall().catch((e) => e);
    assert.ok(err instanceof Unauthorized, `got ${err}`);
    assert.equal(exchanges, 1, "more than one re-exchange");
    await assertNoSecret(assert, err, TOKEN, `ck_standin_${keys}`, `ck_standin_${keys - 1}`);
  } finally {
    await s.close();
  }
});

test("a key within refreshBeforeMs of expiry is re-exchanged; a longer-lived one is reused", async () => {
  let exchanges = 0;
  let validMs = 90_000;
  const s = await standIn((r) => (r.url.startsWith("/v1/auth/") ? (exchanges++, exchanged(validMs)) : { status: 200, body: { memories: [] } }));
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static" }); // refresh 60 s before
    await c.recall();
    await c.recall();
    assert.equal(exchanges, 1);
    validMs = 30_000;
    const c2 = new Client({ url: s.url, tokenFile, method: "static" });
    await c2.recall();
    await c2.recall();
    assert.equal(exchanges, 3, "a key 30 s from expiry was reused");
    const c3 = new Client({ url: s.url, tokenFile, method: "static", refreshBeforeMs: 10_000 });
    await c3.recall();
    await c3.recall();
    assert.equal(exchanges, 4);
  } finally {
    await s.close();
  }
});

test("429 on exchange is RateLimited with retryAfter; the kubernetes method is the default", async () => {
  const s = await standIn(() => ({ status: 429, headers: { "Retry-After": "7" }, body: { error: "rate_limited", message: "too many exchanges from this pod; retry later" } }));
  try {
    const err = await new Client({ url: s.url, tokenFile }).exchange().catch((e) => e);
    assert.ok(err instanceof RateLimited, `got ${err}`);
    assert.equal(err.code, "rate_limited");
    assert.equal(err.retryAfter, 7);
    assert.equal(s.requests[0].url, "/v1/auth/kubernetes");
    await assertNoSecret(assert, err, TOKEN);
  } finally {
    await s.close();
  }
});

test("a page that is not a custody error body says so; details and Retry-After dates are handled", async () => {
  let answer;
  const s = await standIn(() => answer);
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static" });
    answer = { status: 502, headers: { "Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT" }, body: "<html>bad gateway</html>" };
    const err = await c.exchange().catch((e) => e);
    assert.ok(err instanceof Unavailable, `got ${err}`);
    assert.equal(err.code, "");
    assert.equal(err.retryAfter, undefined);
    assert.match(err.message, /not a custody error body/);
    assert.equal(err.body, "<html>bad gateway</html>");

    answer = { status: 404, body: "404 page not found\n" };
    const nf = await c.exchange().catch((e) => e);
    assert.ok(nf instanceof CustodyError && nf.status === 404 && nf.code === "", `got ${nf}`);

    answer = { status: 413, body: { error: "too_large", message: "text over 65536 bytes", limit_bytes: 65536 } };
    const big = await c.exchange().catch((e) => e);
    assert.equal(big.name, "BadRequest");
    assert.equal(big.details.limit_bytes, 65536);
    assert.equal(big.serverMessage, "text over 65536 bytes");
  } finally {
    await s.close();
  }
});

test("timeouts and aborts are TransportErrors; a closed port too", async () => {
  const s = await standIn((r) => (r.url.startsWith("/v1/auth/") ? exchanged() : new Promise(() => {})));
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static", timeoutMs: 300 });
    const slow = await c.recall().catch((e) => e);
    assert.ok(slow instanceof TransportError, `got ${slow}`);
    assert.match(slow.message, /no answer within 300 ms/);

    const c2 = new Client({ url: s.url, tokenFile, method: "static" });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const aborted = await c2.recall("", { signal: ac.signal }).catch((e) => e);
    assert.ok(aborted instanceof TransportError, `got ${aborted}`);
    assert.match(aborted.message, /aborted/);
  } finally {
    await s.close();
  }
  const closed = await new Client({ url: s.url, tokenFile, method: "static" }).exchange().catch((e) => e);
  assert.ok(closed instanceof TransportError, `got ${closed}`);
  assert.match(closed.message, /ECONNREFUSED/);
});

test("an abort while waiting out signer_standby stops the retries", async () => {
  let runs = 0;
  const s = await standIn((r) => (r.url.startsWith("/v1/auth/") ? exchanged() : (runs++, standby)));
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static" });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const t0 = Date.now();
    const err = await c.registerRun({ signal: ac.signal }).catch((e) => e);
    assert.ok(err instanceof Unavailable && err.code === "signer_standby", `got ${err}`);
    assert.ok(Date.now() - t0 < 900, "the abort did not cut the pause");
    assert.equal(runs, 1);
  } finally {
    await s.close();
  }
});

test("bad configurations are ConfigErrors", () => {
  for (const cfg of [
    { url: "", tokenFile },
    { url: "http://127.0.0.1:1", tokenFile: "" },
    { url: "ftp://127.0.0.1:1", tokenFile },
    { url: "not a url", tokenFile },
    { url: "http://user:secret-pw@127.0.0.1:1", tokenFile },
    { url: "http://127.0.0.1:1", tokenFile, method: "ldap" },
    { url: "http://127.0.0.1:1", tokenFile, timeoutMs: -1 },
    { url: "https://127.0.0.1:1", tokenFile, caFile: join(tmp.dir, "missing.pem") },
    { url: "https://127.0.0.1:1", tokenFile, caFile: tokenFile },
  ]) {
    assert.throws(() => new Client(cfg), (e) => e instanceof ConfigError && !e.message.includes("secret-pw"), JSON.stringify(cfg));
  }
});

test("a base URL with a path prefixes every request", async () => {
  const s = await standIn((r) => (r.url.endsWith("/v1/auth/static") ? exchanged() : { status: 200, body: { memories: [] } }));
  try {
    const c = new Client({ url: s.url + "/custody/", tokenFile, method: "static" });
    await c.recall();
    assert.deepEqual(s.requests.map((r) => r.url), ["/custody/v1/auth/static", "/custody/v1/memory/t/a/memories"]);
  } finally {
    await s.close();
  }
});

test("a kept-alive connection the server dropped is replaced once, transparently", async () => {
  const { createServer } = await import("node:http");
  let connections = 0;
  let served = 0;
  let drop = false;
  const server = createServer((req, res) => {
    if (drop && req.socket.servedBefore) {
      // A connection closed under the request (RST), the way an idle
      // timeout racing the request does: nothing is answered.
      drop = false;
      req.socket.resetAndDestroy();
      return;
    }
    req.socket.servedBefore = true;
    served++;
    const body = req.url.startsWith("/v1/auth/") ? exchanged().body : { memories: [] };
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  });
  server.on("connection", () => connections++);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const c = new Client({ url: `http://127.0.0.1:${server.address().port}`, tokenFile, method: "static" });
    await c.recall(); // exchange + recall on one kept-alive connection
    assert.equal(connections, 1);
    drop = true;
    const before = served;
    assert.deepEqual(await c.recall(), []);
    assert.equal(drop, false, "the reused connection was not used");
    assert.equal(served, before + 1);
    assert.equal(connections, 2);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test("one caller's abort does not fail the exchange others share", async () => {
  let release;
  const gate = new Promise((r) => (release = r));
  const s = await standIn(async (r) => {
    if (r.url.startsWith("/v1/auth/")) {
      await gate;
      return exchanged();
    }
    return { status: 200, body: { memories: [] } };
  });
  try {
    const c = new Client({ url: s.url, tokenFile, method: "static" });
    const ac = new AbortController();
    const first = c.recall("", { signal: ac.signal }).catch((e) => e);
    const second = c.recall();
    await new Promise((r) => setTimeout(r, 100));
    ac.abort();
    assert.ok((await first) instanceof TransportError);
    release();
    assert.deepEqual(await second, []);
    assert.equal(s.requests.filter((r) => r.url.startsWith("/v1/auth/")).length, 1);
  } finally {
    await s.close();
  }
});
