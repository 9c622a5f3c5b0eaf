// README.md's quickstart is ten lines that compile and run: executed against
// a real `tally serve` (SQLite), on a tenant of its own, twice (the second
// run replays the first).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startTally } from "./helpers/tally.mjs";

const README = new URL("../README.md", import.meta.url);
const DIST = new URL("../dist/index.js", import.meta.url).href;

function quickstart() {
  const text = readFileSync(README, "utf8");
  const section = text.slice(text.indexOf("## Quickstart"));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  assert.ok(match, "README.md has no ts block under ## Quickstart");
  return match[1];
}

function runModule(code, env) {
  return new Promise((resolveRun, reject) => {
    execFile(process.execPath, ["--input-type=module", "-e", code], { env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      if (error) reject(new Error(`the quickstart failed: ${stderr || error.message}`));
      else resolveRun(stdout);
    });
  });
}

test("the README quickstart is ten lines", () => {
  assert.equal(quickstart().split("\n").filter((_, i, all) => i < all.length - 1 || all[i] !== "").length, 10);
});

test("the README quickstart compiles against the published types (tsc --strict)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tally-sdk-readme-"));
  try {
    const file = join(dir, "quickstart.mts");
    writeFileSync(file, quickstart().replace('"@tally/client"', JSON.stringify(fileURLToPath(DIST))));
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
