// The signer (runs, decisions, approvals) against a real custody serve
// with the example policies of deploy/base/policies (tenant "agents").

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, Conflict, Forbidden, NotFound } from "../dist/index.js";
import { Custody } from "./harness.js";

let custody;
before(async () => {
  custody = await Custody.start({
    a: ["agents", "dev", "pod-a"],
    other: ["agents", "other", "pod-o"],
  });
});
after(async () => {
  await custody?.stop();
});

test("run: register, decide, complete, model event, status, close", async () => {
  const c = new Client(custody.config("a"));
  const run = await c.registerRun();
  assert.ok(run.run, "no run id");
  assert.equal(run.agent, "dev");
  assert.equal(run.session, "pod-a");
  assert.equal(run.closed, false);

  const d = await c.decide(run.run, "c1", "Bash", { command: "ls -la" });
  assert.equal(d.effect, "allow");
  assert.equal(d.call_id, "c1");
  assert.ok(d.rule_ids.includes("AGENTS-001"), `rule_ids ${d.rule_ids}`);
  assert.match(d.args_commitment, /./);
  assert.ok(d.run_seq >= 1);

  const done = await c.complete(run.run, "c1", "ok");
  assert.ok(done.run_seq > d.run_seq);
  const ev = await c.recordModelEvent(run.run, { event: "response", provider: "anthropic", model: "claude", input_tokens: 12, output_tokens: 34 });
  assert.ok(ev.run_seq > done.run_seq);

  const dup = await c.decide(run.run, "c1", "Bash", { command: "ls" }).catch((e) => e);
  assert.ok(dup instanceof Conflict, `got ${dup}`);
  assert.equal(dup.code, "duplicate_call");

  const st = await c.runStatus(run.run);
  assert.equal(st.closed, false);
  assert.ok(st.records >= 4, `records ${st.records}`);

  const closed = await c.closeRun(run.run);
  assert.ok(closed.run_seq > ev.run_seq);
  const after = await c.runStatus(run.run);
  assert.equal(after.closed, true);
  assert.ok(after.closed_reason, "no closed_reason");

  const late = await c.decide(run.run, "c2", "Bash", { command: "ls" }).catch((e) => e);
  assert.ok(late instanceof Conflict, `got ${late}`);
  assert.equal(late.status, 409);
  assert.equal(late.code, "run_closed");
});

test("deny: a built-in network rule and an unmatched tool", async () => {
  const c = new Client(custody.config("a"));
  const { run } = await c.registerRun();
  const meta = await c.decide(run, "w1", "WebFetch", { url: "http://169.254.169.254/latest/meta-data/" });
  assert.equal(meta.effect, "deny");
  assert.ok(meta.rule_ids.includes("CUSTODY-NET-METADATA"), `rule_ids ${meta.rule_ids}`);
  const unknown = await c.decide(run, "u1", "LaunchMissiles", {});
  assert.equal(unknown.effect, "deny");
  await c.closeRun(run);
});

test("another agent's run is forbidden, an unknown run not found", async () => {
  const a = new Client(custody.config("a"));
  const other = new Client(custody.config("other"));
  const { run } = await a.registerRun();
  const err = await other.runStatus(run).catch((e) => e);
  assert.ok(err instanceof Forbidden, `got ${err}`);
  assert.equal(err.code, "forbidden");
  const nf = await a.runStatus("no-such-run").catch((e) => e);
  assert.ok(nf instanceof NotFound, `got ${nf}`);
  assert.equal(nf.code, "not_found");
});

test("approvals: ask, request, wait, approve, consume once with exactly the args", async () => {
  const c = new Client(custody.config("a"));
  const { run } = await c.registerRun();
  const args = { command: "rm -rf /tmp/scratch" };
  const d = await c.decide(run, "r1", "Bash", args);
  assert.equal(d.effect, "ask");
  assert.ok(d.rule_ids.includes("AGENTS-003"), `rule_ids ${d.rule_ids}`);

  const notAsk = await c.requestApproval(run, "r1", "Bash", { command: "rm -rf /" }).catch((e) => e);
  assert.ok(notAsk instanceof Conflict && notAsk.code === "not_ask", `got ${notAsk}`);

  const ap = await c.requestApproval(run, "r1", "Bash", args);
  assert.equal(ap.state, "pending");
  assert.equal(ap.call_id, "r1");
  assert.equal(ap.tool, "Bash");

  const t0 = Date.now();
  const still = await c.waitApproval(run, ap.approval_id, { waitSeconds: 1 });
  assert.equal(still.state, "pending");
  assert.ok(Date.now() - t0 >= 900, "waitApproval did not wait");

  const early = await c.consumeApproval(run, ap.approval_id, args).catch((e) => e);
  assert.ok(early instanceof Conflict && early.code === "approval_pending", `got ${early}`);

  // The operator approves while the agent waits.
  const waiting = c.waitApproval(run, ap.approval_id, { waitSeconds: 30 });
  await new Promise((r) => setTimeout(r, 300));
  const r = await custody.admin("POST", `/v1/signer/approvals/${ap.approval_id}/approve`);
  assert.equal(r.status, 200, r.text);
  const approved = await waiting;
  assert.equal(approved.state, "approved");

  const wrong = await c.consumeApproval(run, ap.approval_id, { command: "rm -rf /" }).catch((e) => e);
  assert.ok(wrong instanceof Conflict && wrong.code === "args_mismatch", `got ${wrong}`);
  const used = await c.consumeApproval(run, ap.approval_id, args);
  assert.equal(used.state, "consumed");
  const twice = await c.consumeApproval(run, ap.approval_id, args).catch((e) => e);
  assert.ok(twice instanceof Conflict && twice.code === "approval_consumed", `got ${twice}`);
  await c.complete(run, "r1", "ok");
  await c.closeRun(run);
});

test("approvals: a denied approval cannot be consumed", async () => {
  const c = new Client(custody.config("a"));
  const { run } = await c.registerRun();
  const args = { command: "sudo rm -rf /var" };
  assert.equal((await c.decide(run, "r2", "Bash", args)).effect, "ask");
  const ap = await c.requestApproval(run, "r2", "Bash", args);
  assert.equal((await custody.admin("POST", `/v1/signer/approvals/${ap.approval_id}/deny`)).status, 200);
  assert.equal((await c.waitApproval(run, ap.approval_id)).state, "denied");
  const err = await c.consumeApproval(run, ap.approval_id, args).catch((e) => e);
  assert.ok(err instanceof Conflict && err.code === "approval_denied", `got ${err}`);
});
