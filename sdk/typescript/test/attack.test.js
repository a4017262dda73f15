// Attacks on the transport: what a dropped connection must not make the
// SDK do.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Client, TransportError } from "../dist/index.js";
import { tempDir } from "./harness.js";

let tmp;
let tokenFile;
before(() => {
  tmp = tempDir();
  tokenFile = join(tmp.dir, "token");
  writeFileSync(tokenFile, "tok-attack-secret-0123456789");
});
after(() => tmp.cleanup());

const exchanged = () => ({
  key: "ck_attack_1",
  key_id: "0".repeat(64),
  expires_at: new Date(Date.now() + 15 * 60_000).toISOString(),
  tenant: "t",
  agent: "a",
  session: "s",
});

// custody read the whole decide on a kept-alive connection, recorded it,
// and the connection was reset before the answer (a replica killed after
// its commit, a proxy's reset). The request is not resent: a second
// decide would be a second request custody must answer (duplicate_call),
// and a second register_run or remember a second record.
test("a POST whose reused connection is reset after custody read it is not sent again", async () => {
  const posts = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (req.url.startsWith("/v1/auth/")) {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify(exchanged()));
        return;
      }
      posts.push(`${req.method} ${req.url} ${body}`);
      req.socket.resetAndDestroy(); // read and "recorded", never answered
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const c = new Client({ url: `http://127.0.0.1:${server.address().port}`, tokenFile, method: "static" });
    await c.exchange(); // the decide below reuses this kept-alive connection
    await assert.rejects(c.decide("r1", "c1", "Bash", { command: "ls" }), TransportError);
    assert.equal(posts.length, 1, `the decide was sent ${posts.length} times: ${posts.join(" | ")}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

// Attack round 10: acquireLease sent Math.trunc(ttlSeconds), so a lease
// asked for under a second was sent as ttl_seconds 0, custody's default
// (5 minutes), and a negative one as the default too.
test("acquireLease rounds a ttl up to whole seconds and refuses a negative one", async () => {
  const sent = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      res.writeHead(200, { "Content-Type": "application/json" });
      if (req.url.startsWith("/v1/auth/")) {
        res.end(JSON.stringify(exchanged()));
        return;
      }
      sent.push(body);
      res.end(JSON.stringify({ name: "plan", epoch: 1, expires_at: "2026-10-12T09:00:00Z", version: 0, state: null }));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const c = new Client({ url: `http://127.0.0.1:${server.address().port}`, tokenFile, method: "static" });
    for (const [ttl, want] of [[0.5, 1], [1, 1], [1.5, 2], [60, 60]]) {
      sent.length = 0;
      await c.acquireLease("plan", { ttlSeconds: ttl });
      assert.deepEqual(sent.map((b) => JSON.parse(b)), [{ ttl_seconds: want }], `ttlSeconds ${ttl}`);
    }
    sent.length = 0;
    for (const bad of [-1, NaN, Infinity]) {
      await assert.rejects(c.acquireLease("plan", { ttlSeconds: bad }), RangeError);
    }
    assert.deepEqual(sent, []);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
