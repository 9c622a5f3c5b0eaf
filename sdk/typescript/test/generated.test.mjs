// The generated types stay in step with the committed OpenAPI document, and
// what is hand-written (error classes, README table) covers all of it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { DEFAULT_INPUT, collectOperations, generate } from "../scripts/generate-types.mjs";
import { OPERATIONS, PROBLEM_CODES, TallyClient, TallyError, problemError } from "../dist/index.js";
import { readCommittedSchemaModule, sdkOperationIds } from "./helpers/operations.mjs";

// Only for work before api/openapi.json is committed; CI leaves it unset.
const DOCUMENT = process.env.TALLY_OPENAPI_DOCUMENT || DEFAULT_INPUT;

function committedDocument() {
  assert.ok(existsSync(DOCUMENT), `the OpenAPI document ${DOCUMENT} is missing (it is committed at api/openapi.json)`);
  return JSON.parse(readFileSync(DOCUMENT, "utf8"));
}

test("src/generated/schema.ts is what the generator makes of the committed document", () => {
  const expected = generate(committedDocument());
  const actual = readCommittedSchemaModule();
  if (actual !== expected) {
    const a = actual.split("\n");
    const e = expected.split("\n");
    const line = a.findIndex((text, i) => text !== e[i]);
    assert.fail(
      `src/generated/schema.ts is stale (first difference at line ${line + 1}:\n` +
        `  committed: ${a[line]}\n  generated: ${e[line]}\n): run \`npm run generate\``,
    );
  }
});

test("the operation table is the document's, and the client has a method per operation", () => {
  const doc = committedDocument();
  const fromDocument = Object.fromEntries(collectOperations(doc).map((op) => [op.id, `${op.method} ${op.path}`]));
  const fromTable = Object.fromEntries(Object.entries(OPERATIONS).map(([id, op]) => [id, `${op.method} ${op.path}`]));
  assert.deepEqual(fromTable, fromDocument);
  for (const id of sdkOperationIds()) {
    assert.equal(typeof TallyClient.prototype[id], "function", `TallyClient.${id}`);
  }
});

test("the generator refuses an operation without an operationId, or one used twice", () => {
  const doc = (paths) => ({ openapi: "3.1.0", info: {}, paths, components: { schemas: { ProblemCode: { type: "string", enum: ["x"] } } } });
  assert.throws(() => generate(doc({ "/v1/x": { get: { responses: {} } } })), /GET \/v1\/x has no operationId/);
  assert.throws(
    () => generate(doc({ "/a": { get: { operationId: "same", responses: {} } }, "/b": { get: { operationId: "same", responses: {} } } })),
    /operationId same is used twice/,
  );
  assert.throws(() => generate({ openapi: "3.1.0", paths: {}, components: { schemas: {} } }), /no `ProblemCode` schema/);
});

test("every documented problem code has its own error class", () => {
  const pascal = (code) => code.replace(/(^|_)([a-z])/g, (_, __, c) => c.toUpperCase());
  for (const code of PROBLEM_CODES) {
    const error = problemError(422, { type: `/problems/${code}`, title: code, status: 422, detail: "d", code });
    assert.ok(error instanceof TallyError);
    assert.notEqual(error.constructor, TallyError, `${code} maps to a subclass`);
    assert.equal(error.name, pascal(code), `${code} → ${pascal(code)}`);
    assert.equal(error.code, code);
  }
  assert.equal(problemError(502, undefined).name, "Unavailable", "a proxy's bare 502 is retryable like a 503");
  assert.equal(problemError(502, undefined).retryable, true);
  assert.equal(problemError(418, "teapot").constructor, TallyError);
});

test("the README's table lists every operation with its method and path", () => {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const rows = new Map();
  for (const match of readme.matchAll(/^\| `(GET|PUT|POST|DELETE|PATCH) ([^`]+)` \| `client\.(\w+)\(/gm)) {
    rows.set(match[3], `${match[1]} ${match[2]}`);
  }
  for (const id of sdkOperationIds()) {
    assert.equal(rows.get(id), `${OPERATIONS[id].method} ${OPERATIONS[id].path}`, `README row of ${id}`);
  }
  assert.equal(rows.size, sdkOperationIds().length, "no row for an operation that does not exist");
});

test("`npm run generate:check` fails when the document changes without regenerating, and passes now", async () => {
  const { execFile } = await import("node:child_process");
  const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const script = new URL("../scripts/generate-types.mjs", import.meta.url).pathname;
  const check = (input) =>
    new Promise((resolveRun) => {
      const args = [script, "--check", ...(input ? ["--input", input] : [])];
      execFile(process.execPath, args, (error, stdout, stderr) => resolveRun({ code: error ? error.code : 0, stdout, stderr }));
    });
  const now = await check(process.env.TALLY_OPENAPI_DOCUMENT);
  assert.equal(now.code, 0, `generate:check fails on the committed document: ${now.stderr}`);
  const dir = mkdtempSync(join(tmpdir(), "tally-sdk-doc-"));
  try {
    // A purely additive change (a new optional property) must be caught too.
    const doc = committedDocument();
    doc.components.schemas.Balance.properties.future_field = { type: "string", description: "added later" };
    const changed = join(dir, "openapi.json");
    writeFileSync(changed, JSON.stringify(doc));
    const stale = await check(changed);
    assert.equal(stale.code, 1, "generate:check passed although the document changed");
    assert.match(stale.stderr, /is stale: run npm run generate/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
