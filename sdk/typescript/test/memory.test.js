// Memory and working state against a real custody serve.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { BadRequest, Client, Conflict, CustodyError, NotFound } from "../dist/index.js";
import { Custody } from "./harness.js";

let custody;
before(async () => {
  custody = await Custody.start({
    a: ["agents", "mem", "pod-a"],
    b: ["agents", "mem", "pod-b"],
    other: ["agents", "other", "pod-c"],
  });
});
after(async () => {
  await custody?.stop();
});

test("remember, recall and forget round trip", async () => {
  const c = new Client(custody.config("a"));
  const r1 = await c.remember("fact", "the build uses nice -n 19", { tags: ["build", "ci"] });
  assert.equal(r1.status, "created");
  assert.equal(r1.memory.kind, "fact");
  assert.equal(r1.memory.session, "pod-a");
  assert.deepEqual(r1.memory.tags, ["build", "ci"]);
  const again = await c.remember("fact", "the build uses nice -n 19", { tags: ["build", "ci"] });
  assert.equal(again.status, "unchanged");
  assert.equal(again.id, r1.id);

  const found = await c.recall("build");
  assert.deepEqual(found.map((m) => m.id), [r1.id]);
  assert.deepEqual(await c.recall("nothing-matches-this"), []);

  await c.forget(r1.id);
  assert.deepEqual(await c.recall("build"), []);
  const err = await c.forget(r1.id).catch((e) => e);
  assert.ok(err instanceof NotFound, `got ${err}`);
  assert.equal(err.code, "not_found");
});

test("a keyed memory supersedes its old value; history shows both", async () => {
  const c = new Client(custody.config("a"));
  const old = await c.remember("preference", "answers in English", { key: "language" });
  const now = await c.remember("preference", "answers in French", { key: "language" });
  assert.equal(now.status, "superseded");
  assert.equal(now.supersedes, old.id);
  const active = await c.recall("", { kind: "preference" });
  assert.deepEqual(active.map((m) => m.text), ["answers in French"]);
  const all = await c.recall("answers", { kind: "preference", history: true });
  assert.deepEqual(all.map((m) => m.text).sort(), ["answers in English", "answers in French"]);
  const oldOne = all.find((m) => m.id === old.id);
  assert.equal(oldOne.superseded_by, now.id);
});

test("recall limit and Unicode keywords", async () => {
  const c = new Client(custody.config("b"));
  for (let i = 0; i < 3; i++) await c.remember("note", `Straße nummer ${i}`);
  assert.equal((await c.recall("STRASSE straße")).length + (await c.recall("Straße")).length > 0, true);
  assert.equal((await c.recall("", { kind: "note", limit: 2 })).length, 2);
  assert.equal((await c.recall("", { kind: "note" })).length, 3);
});

test("memories are per agent", async () => {
  const a = new Client(custody.config("a"));
  const other = new Client(custody.config("other"));
  await a.remember("fact", "only for mem: zebra");
  assert.deepEqual(await other.recall("zebra"), []);
  assert.equal((await a.recall("zebra")).length, 1);
});

test("working state: lease, fenced put, version conflict, lease held, lease lost", async () => {
  const a = new Client(custody.config("a"));
  const b = new Client(custody.config("b")); // same agent, another pod
  const fresh = await a.getState("plan").catch((e) => e);
  assert.ok(fresh instanceof NotFound && fresh.code === "not_found", `got ${fresh}`);

  const la = await a.acquireLease("plan", { ttlSeconds: 120 });
  assert.ok(la.epoch >= 1);
  assert.equal(la.version, 0);
  assert.ok(Date.parse(la.expires_at) > Date.now() + 60_000);

  const s1 = await a.putState("plan", la.epoch, 0, { step: 1, todo: ["a", "b"] });
  assert.equal(s1.version, 1);
  assert.deepEqual(s1.state, { step: 1, todo: ["a", "b"] });
  assert.equal(s1.lease.holder, "pod-a");

  // A stale version: 412 version_conflict with the current version.
  const stale = await a.putState("plan", la.epoch, 0, { step: 99 }).catch((e) => e);
  assert.ok(stale instanceof Conflict, `got ${stale}`);
  assert.equal(stale.status, 412);
  assert.equal(stale.code, "version_conflict");
  assert.equal(stale.details.version, 1);

  // Another pod cannot take a live lease: 409 lease_held naming the holder.
  const held = await b.acquireLease("plan").catch((e) => e);
  assert.ok(held instanceof Conflict, `got ${held}`);
  assert.equal(held.status, 409);
  assert.equal(held.code, "lease_held");
  assert.equal(held.details.holder, "pod-a");

  // Nor write under the holder's epoch: 409 lease_lost.
  const fenced = await b.putState("plan", la.epoch, 1, { step: 2 }).catch((e) => e);
  assert.ok(fenced instanceof Conflict, `got ${fenced}`);
  assert.equal(fenced.code, "lease_lost");

  // Released, the other pod resumes from the state with a new epoch; the
  // old epoch is fenced off.
  await a.releaseLease("plan", la.epoch);
  const lb = await b.acquireLease("plan");
  assert.ok(lb.epoch > la.epoch, `epoch ${lb.epoch} after ${la.epoch}`);
  assert.equal(lb.version, 1);
  assert.deepEqual(lb.state, { step: 1, todo: ["a", "b"] });
  const late = await a.putState("plan", la.epoch, 1, { step: 3 }).catch((e) => e);
  assert.ok(late instanceof CustodyError && late.code === "lease_lost", `got ${late}`);
  const s2 = await b.putState("plan", lb.epoch, 1, "a string state");
  assert.equal(s2.version, 2);
  assert.equal((await a.getState("plan")).state, "a string state");

  const rel = await a.releaseLease("plan", la.epoch).catch((e) => e);
  assert.equal(rel.code, "lease_lost");
  await b.releaseLease("plan", lb.epoch);
  assert.equal((await a.getState("plan")).lease, undefined);
});

test("state names: custody's alphabet round trips, another is a BadRequest", async () => {
  const c = new Client(custody.config("a"));
  const bad = await c.getState("notes v2").catch((e) => e);
  assert.ok(bad instanceof BadRequest, `got ${bad}`);
  assert.equal(bad.code, "bad_request");
  const name = "notes.v2_x-1";
  const l = await c.acquireLease(name);
  await c.putState(name, l.epoch, 0, [1, 2, 3]);
  const s = await c.getState(name);
  assert.equal(s.name, name);
  assert.deepEqual(s.state, [1, 2, 3]);
});
