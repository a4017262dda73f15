// `npm pack` makes a working package: installed from the tarball (offline:
// it has no dependencies) it imports under its name, exports the client
// and errors, and its type declarations check a TypeScript consumer.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { HERE, tempDir } from "./harness.js";

const PKG = join(HERE, "..");
const pkg = JSON.parse(readFileSync(join(PKG, "package.json"), "utf8"));
let tmp;
let tarball;

before(() => {
  tmp = tempDir("custody-sdk-ts-pack-");
  // --ignore-scripts: the test target has built dist/ already (prepack
  // would run tsc again).
  const out = execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", tmp.dir], { cwd: PKG, encoding: "utf8" });
  const [info] = JSON.parse(out);
  tarball = join(tmp.dir, info.filename);
  const files = info.files.map((f) => f.path).sort();
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"), `packed ${files}`);
  assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("node_modules/")), `packed ${files}`);
  const app = join(tmp.dir, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", tarball], { cwd: app, stdio: "pipe" });
});
after(() => tmp?.cleanup());

test("the packed package has no runtime dependencies and declares Node 20", () => {
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.engines.node, ">=20");
  assert.equal(pkg.type, "module");
});

test("the installed package imports by name", () => {
  const app = join(tmp.dir, "app");
  const out = execFileSync(process.execPath, ["--input-type=module", "-e",
    `import { Client, CustodyError, Conflict, TLSError } from ${JSON.stringify(pkg.name)};
     const c = new Client({ url: "http://127.0.0.1:1", tokenFile: "/nonexistent" });
     console.log(typeof c.remember, typeof c.decide, new Conflict("x") instanceof CustodyError, TLSError.name);`], { cwd: app, encoding: "utf8" });
  assert.equal(out.trim(), "function function true TLSError");
});

test("the declarations type-check a consumer, and catch a wrong call", () => {
  const app = join(tmp.dir, "app");
  const tsc = join(PKG, "node_modules", "typescript", "bin", "tsc");
  writeFileSync(join(app, "tsconfig.json"), JSON.stringify({
    compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true, types: [], typeRoots: [join(PKG, "node_modules", "@types")] },
    include: ["*.ts"],
  }));
  const ok = `import { Client, Conflict, type Decision, type Lease } from ${JSON.stringify(pkg.name)};
export async function main(): Promise<void> {
  const c = Client.fromEnv(undefined, { standbyWaitMs: 5000 });
  const run = await c.registerRun();
  const d: Decision = await c.decide(run.run, "c1", "Bash", { command: "ls" });
  if (d.effect === "ask") await c.requestApproval(run.run, "c1", "Bash", { command: "ls" });
  const l: Lease = await c.acquireLease("plan", { ttlSeconds: 60 });
  try {
    await c.putState("plan", l.epoch, l.version, { step: 1 });
  } catch (e) {
    if (e instanceof Conflict && e.code === "version_conflict") console.log(e.details["version"]);
  }
  const ms = await c.recall("q", { kind: "fact", limit: 3 });
  console.log(ms[0]?.created_at.length, (await c.remember("fact", "x", { tags: ["t"] })).status);
}
`;
  writeFileSync(join(app, "ok.ts"), ok);
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app, stdio: "pipe" });
  writeFileSync(join(app, "bad.ts"), `import { Client } from ${JSON.stringify(pkg.name)};
export const p = new Client({ url: "x", tokenFile: "y" }).putState("plan", "1", 0, {});
`);
  let failed;
  try {
    execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app, encoding: "utf8", stdio: "pipe" });
  } catch (e) {
    failed = e.stdout;
  }
  assert.match(failed ?? "", /bad\.ts.*TS2345/s, "a string epoch type-checked");
});
