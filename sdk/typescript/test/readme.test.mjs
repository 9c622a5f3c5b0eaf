// README.md's quickstart is ten lines that compile and run: executed against
// a real `tally serve` (SQLite), on a tenant of its own, twice (the second
// run replays the first). Its `once()` example too, against a stub payment
// provider: one charge, sent with the intent ID as its Idempotency-Key.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startTally } from "./helpers/tally.mjs";
import { startStub } from "./helpers/net.mjs";
import ts from "typescript";

const README = new URL("../README.md", import.meta.url);
const DIST = new URL("../dist/index.js", import.meta.url).href;

/** The first ts block under the `## heading` of README.md. */
function tsBlock(heading) {
  const text = readFileSync(README, "utf8");
  const at = text.indexOf(`## ${heading}`);
  assert.ok(at >= 0, `README.md has no ## ${heading}`);
  const match = /```ts\n([\s\S]*?)```/.exec(text.slice(at));
  assert.ok(match, `README.md has no ts block under ## ${heading}`);
  return match[1];
}

function quickstart() {
  return tsBlock("Quickstart");
}

function onceExample() {
  return tsBlock("Intents");
}

/** `tsc --strict` on `code` (imports of @tally/client resolved to dist). */
async function typecheck(code) {
  const dir = mkdtempSync(join(tmpdir(), "tally-sdk-readme-"));
  try {
    const file = join(dir, "example.mts");
    writeFileSync(file, code.replace('"@tally/client"', JSON.stringify(fileURLToPath(DIST))));
    const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
    const typeRoots = fileURLToPath(new URL("../node_modules/@types", import.meta.url));
    const args = [tsc, "--noEmit", "--strict", "--exactOptionalPropertyTypes", "--module", "nodenext", "--target", "es2022",
      "--types", "node", "--typeRoots", typeRoots, file];
    await new Promise((resolveRun, reject) => {
      execFile(process.execPath, args, (error, stdout, stderr) => (error ? reject(new Error(`tsc: ${stdout}${stderr}`)) : resolveRun()));
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function runModule(code, env) {
  return new Promise((resolveRun, reject) => {
    execFile(process.execPath, ["--input-type=module", "-e", code], { env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      if (error) reject(new Error(`the README example failed: ${stderr || error.message}`));
      else resolveRun(stdout);
    });
  });
}

test("the README quickstart is ten lines", () => {
  assert.equal(quickstart().split("\n").filter((_, i, all) => i < all.length - 1 || all[i] !== "").length, 10);
});

test("the README quickstart compiles against the published types (tsc --strict)", async () => {
  await typecheck(quickstart());
});

test("the README's once() example compiles against the published types (tsc --strict)", async () => {
  await typecheck(onceExample());
});

test("the README quickstart runs against a real server, and again as a replay", async (t) => {
  const server = await startTally({ name: "sqlite" });
  t.after(() => server.stop());
  const { apiKey } = await server.createKey({ scopes: "post,read" });
  const code = quickstart()
    .replace('"@tally/client"', JSON.stringify(DIST))
    .replace("http://127.0.0.1:8080", server.baseUrl);
  for (const run of [1, 2]) {
    const lines = (await runModule(code, { TALLY_KEY: apiKey })).trim().split("\n");
    assert.equal(lines.length, 3, lines.join("\n"));
    assert.match(lines[0], new RegExp(`^ent_[0-9a-f]{32} ${run === 1 ? "false" : "true"}$`), `run ${run}`);
    assert.match(lines[1], /^ent_[0-9a-f]{32} \[ 'amount' \]$/);
    assert.equal(lines[2], "-0.0125");
  }
});

test("the README's once() example charges once, with the intent ID as Idempotency-Key, and replays", async (t) => {
  const server = await startTally({ name: "sqlite" });
  t.after(() => server.stop());
  const provider = await startStub(() => ({
    status: 200,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ id: "ch_9f3", status: "succeeded" }),
  }));
  t.after(provider.close);
  const { apiKey } = await server.createKey({ scopes: "post,read" });
  const source = ts.transpileModule(onceExample(), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const code = source
    .replace('"@tally/client"', JSON.stringify(DIST))
    .replace("http://127.0.0.1:8080", server.baseUrl)
    .replace("https://api.payments.example", provider.baseUrl);
  for (const run of [1, 2]) {
    const out = (await runModule(code, { TALLY_KEY: apiKey })).trim();
    assert.equal(out, `{ charge_id: 'ch_9f3' } ${run === 2}`, `run ${run}`);
  }
  assert.equal(provider.requests.length, 1, "the provider was called once");
  assert.equal(provider.requests[0].url, "/v1/charges");
  assert.equal(provider.requests[0].headers["idempotency-key"], "inv_2026_0042");
  const { TallyClient } = await import(DIST);
  const tally = new TallyClient({ baseUrl: server.baseUrl, apiKey });
  const entries = (await tally.listEntries({ account: "cust_42" })).entries;
  assert.deepEqual(entries.map((e) => [e.kind, e.upstream_id, e.amount]), [["payment", "ch_9f3", "49"]], "one payment entry");
});
